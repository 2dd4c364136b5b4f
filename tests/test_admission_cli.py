"""Policy files, plugin listing, refusals and determinism through the real CLI."""

from __future__ import annotations

from pathlib import Path

from conftest import POLICIES, REPO, run_cli

NAMES = ("lanes", "deadline", "fair-share", "aimd", "lpm")


def test_every_admission_policy_file_validates_and_every_policy_is_listed() -> None:
    result = run_cli("validate", *(str(POLICIES / f"{n}.yaml") for n in NAMES))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok (") == len(NAMES)
    listed = run_cli("plugins", "--json").json()
    admission = {p["name"] for p in listed if p["kind"] == "admission"}
    assert {"sla-lanes", "deadline-edf", "fair-share", "aimd", "lpm", "priority-fcfs"} <= admission
    assert any(p["kind"] == "kv_allocator" and p["name"] == "prefix-cache" for p in listed)


def test_lpm_without_a_prefix_cache_is_refused_with_the_reason(tmp_path: Path) -> None:
    text = (POLICIES / "lpm.yaml").read_text().replace("name: prefix-cache", "name: paged")
    text = text.replace("  options:\n    block_size: 16         # tokens per prefix_blocks id in the workload\n", "")
    (tmp_path / "p.yaml").write_text(text)
    result = run_cli("replay", "--input", str(REPO / "fixtures/admission/lpm.json"), "--policy",
                     str(tmp_path / "p.yaml"), "--output", str(tmp_path / "r.json"))
    assert result.returncode == 2
    assert 'allocator "paged" has no prefix cache' in result.stderr
    assert "Traceback" not in result.stderr


def test_engine_scheduler_refuses_an_admission_section(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "version: 1\nscheduler: {name: sglang, options: {max_total_tokens: 4096}}\n"
        "admission: {name: sla-lanes}\n")
    result = run_cli("replay", "--input", str(REPO / "fixtures/admission/lanes.json"), "--policy",
                     str(tmp_path / "p.yaml"), "--output", str(tmp_path / "r.json"))
    assert result.returncode == 2
    assert "orders its own queue" in result.stderr and "remove the admission section" in result.stderr


def test_reports_are_byte_identical_across_hash_seeds(tmp_path: Path) -> None:
    outs = []
    for seed in ("0", "12345"):
        out = tmp_path / f"r{seed}.json"
        result = run_cli("replay", "--input", str(REPO / "fixtures/admission/lpm.json"), "--policy",
                         str(POLICIES / "lpm.yaml"), "--output", str(out), "--quiet",
                         env={"PYTHONHASHSEED": seed})
        assert result.returncode == 0, result.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_default_policy_fingerprint_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    result = run_cli("replay", "--input", str(REPO / "fixtures/workload.json"), "--output", str(out),
                     "--policy", str(POLICIES / "default.yaml"))
    assert result.returncode == 0, result.stderr
    assert "fingerprint 3a8939e35a618842" in result.stdout
