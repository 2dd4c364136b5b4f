"""The ``sglang`` mirror against recorded runs of the real SGLang 0.5.23 scheduler.

Every case in fixtures/sglang-reference/cases.json was recorded with
adapters/sglang/tools/record_reference.py (drive_sglang.py of the reference
harness, fixtures/sglang-reference/README.md); CI needs no SGLang. Each must
match on every step and every logged field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tickgate import compare_steps, load_reference_workload, read_reference_steps
from tickgate.testing import run_cli
from tickgate_sglang.conformance import SPEC

REF = Path(__file__).resolve().parents[3] / "fixtures" / "sglang-reference"
CASES = [c["name"] for c in json.loads((REF / "cases.json").read_text())]
#: cases the mirror does not match yet: name -> (first differing step, why)
KNOWN: dict[str, tuple[int, str]] = {}


def _check(name: str, config_path: Path | None = None, reference: list | None = None) -> dict:
    requests, config = load_reference_workload(REF / f"{name}.workload.json", config_path, SPEC)
    ref = reference if reference is not None else list(read_reference_steps(REF / f"{name}.steps.jsonl", SPEC))
    return compare_steps(ref, SPEC.run_mirror(requests, config), SPEC)


def test_cases_cover_the_issue_list() -> None:
    configs = [json.loads((REF / f"{n}.workload.json").read_text())["config"] for n in CASES]
    summaries = [json.loads((REF / f"{n}.summary.json").read_text()) for n in CASES]
    assert {c.get("schedule_policy", "fcfs") for c in configs} == {"fcfs", "lpm", "dfs-weight", "lof", "random"}
    assert {c.get("page_size", 1) for c in configs} == {1, 16, 32}
    assert {c.get("disable_radix_cache", False) for c in configs} == {True, False}
    assert any(c.get("chunked_prefill_size", 2048) <= 0 for c in configs)
    assert any(c.get("ignore_eos") for c in configs)
    assert any(c.get("ignore_eos") and c.get("disable_radix_cache") for c in configs)
    assert sum(s["totals"]["retractions"] for s in summaries) >= 5
    assert sum(s["totals"]["prefix_hit_tokens"] for s in summaries) > 10_000
    assert all(s["sglang_version"] == "0.5.23" and not s["deadlock"] for s in summaries)


@pytest.mark.parametrize("name", CASES)
def test_every_step_matches_sglang(name: str, request: pytest.FixtureRequest) -> None:
    if name in KNOWN:
        step, why = KNOWN[name]
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"first differs at step {step}: {why}"))
    result = _check(name)
    assert result["first_divergence"] is None, result["first_divergence"]["description"]
    assert result["steps_identical"] == result["steps_total"] == result["mirror_steps"] > 0


def test_a_different_option_is_reported_at_the_right_step_and_field(tmp_path: Path) -> None:
    """With the recorded ratio estimate replaced (decay over 60 steps instead of
    600) the first decode step's ratio is the first thing to differ."""
    name = "fcfs-pressure"
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"new_token_ratio_decay_steps": 60}))
    ref = list(read_reference_steps(REF / f"{name}.steps.jsonl", SPEC))
    first_decode = next(line for line in ref if line["batch"] == "decode")
    result = _check(name, cfg)
    assert result["first_divergent_step"] == first_decode["step"]
    assert result["first_divergence"]["field"] == "new_token_ratio"
    assert result["steps_identical"] < result["steps_total"]


def test_a_changed_recorded_decision_is_found_and_described() -> None:
    name = "fcfs-pressure"
    ref = list(read_reference_steps(REF / f"{name}.steps.jsonl", SPEC))
    target = next(i for i, line in enumerate(ref) if line["retracted"])
    ref[target] = {**ref[target], "retracted": []}
    result = _check(name, reference=ref)
    assert result["first_divergent_step"] == ref[target]["step"]
    assert result["first_divergence"]["field"] == "retracted"
    assert result["steps_identical"] == len(ref) - 1
    assert "retracted differs" in result["first_divergence"]["description"]


def test_the_command_exits_0_on_a_match_and_1_on_a_mismatch(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    args = ["conformance", "sglang", "--workload", str(REF / "small-fcfs.workload.json"),
            "--reference", str(REF / "small-fcfs.steps.jsonl"), "--output", str(out)]
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["steps_total"] == report["steps_identical"] == 808 and report["first_divergent_step"] is None
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"max_running_requests": 2}))
    res = run_cli(*args, "--config", str(cfg))
    assert res.returncode == 1
    report = json.loads(out.read_text())
    assert report["first_divergence"]["description"] in res.stderr
    assert report["config"]["max_running_requests"] == 2


def test_a_bad_config_value_names_its_file_and_path(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"schedule_policy": "shortest"}))
    out = tmp_path / "r.json"
    res = run_cli("conformance", "sglang", "--workload", str(REF / "small-fcfs.workload.json"),
                  "--reference", str(REF / "small-fcfs.steps.jsonl"), "--output", str(out), "--config", str(cfg))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().startswith(f"error: {cfg}: $.schedule_policy: expected one of")
    assert not out.exists()


def test_an_unknown_config_key_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"block_size": 16}))
    res = run_cli("conformance", "sglang", "--workload", str(REF / "small-fcfs.workload.json"),
                  "--reference", str(REF / "small-fcfs.steps.jsonl"), "--output", str(tmp_path / "r.json"),
                  "--config", str(cfg))
    assert res.returncode == 2 and "unknown config keys ['block_size']" in res.stderr


def test_a_bad_reference_line_is_one_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "steps.jsonl"
    lines = (REF / "small-fcfs.steps.jsonl").read_text().splitlines()
    lines[4] = json.dumps({k: v for k, v in json.loads(lines[4]).items() if k != "free_tokens"})
    bad.write_text("\n".join(lines) + "\n")
    res = run_cli("conformance", "sglang", "--workload", str(REF / "small-fcfs.workload.json"),
                  "--reference", str(bad), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 2 and f"{bad}:5" in res.stderr and "free_tokens" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
