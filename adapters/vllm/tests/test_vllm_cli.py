"""``tickgate conformance vllm`` as users run it: exit codes, report, errors."""

from __future__ import annotations

import json
from pathlib import Path

from tickgate.testing import run_cli

REPO = Path(__file__).resolve().parents[3]


REF = REPO / "fixtures" / "vllm-reference"


def test_identical_run_exits_0_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = run_cli("conformance", "vllm", "--workload", str(REF / "small-priority.workload.json"),
                  "--reference", str(REF / "small-priority.steps.jsonl"), "--output", str(out))
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["steps_total"] == report["steps_identical"] == 15
    assert report["first_divergent_step"] is None


def test_config_override_changes_decisions_and_exits_1(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"policy": "fcfs"}))  # the trace was recorded with priority
    out = tmp_path / "r.json"
    res = run_cli("conformance", "vllm", "--workload", str(REF / "pressure-preempt-priority.workload.json"),
                  "--reference", str(REF / "pressure-preempt-priority.steps.jsonl"),
                  "--output", str(out), "--config", str(cfg))
    assert res.returncode == 1
    report = json.loads(out.read_text())
    assert report["first_divergent_step"] is not None
    assert report["steps_identical"] < report["steps_total"]
    assert report["first_divergence"]["description"] in res.stderr


def test_bad_reference_line_is_one_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "steps.jsonl"
    lines = (REF / "small-fcfs.steps.jsonl").read_text().splitlines()
    lines[2] = lines[2][:-5]
    bad.write_text("\n".join(lines) + "\n")
    out = tmp_path / "r.json"
    res = run_cli("conformance", "vllm", "--workload", str(REF / "small-fcfs.workload.json"),
                  "--reference", str(bad), "--output", str(out))
    assert res.returncode == 2
    assert f"{bad}:3" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_bad_workload_field_names_the_json_path(tmp_path: Path) -> None:
    wl = json.loads((REF / "small-fcfs.workload.json").read_text())
    wl["requests"][1]["max_output_len"] = "six"
    bad = tmp_path / "w.json"
    bad.write_text(json.dumps(wl))
    res = run_cli("conformance", "vllm", "--workload", str(bad),
                  "--reference", str(REF / "small-fcfs.steps.jsonl"), "--output", str(tmp_path / "r.json"))
    assert res.returncode == 2
    assert "$.requests[1].max_output_len" in res.stderr and "Traceback" not in res.stderr


def test_a_bad_config_value_names_its_file_and_path(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"block_size": 0}))
    out = tmp_path / "r.json"
    res = run_cli("conformance", "vllm", "--workload", str(REF / "small-priority.workload.json"),
                  "--reference", str(REF / "small-priority.steps.jsonl"), "--output", str(out), "--config", str(cfg))
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: {cfg}: $.block_size: 0 is less than the minimum of 1"
    assert not out.exists()


def test_the_fast_paths_by_default_and_the_full_step_with_slow_path(tmp_path: Path) -> None:
    reports = {}
    for flag in ([], ["--slow-path"]):
        out = tmp_path / f"r{len(flag)}.json"
        res = run_cli("conformance", "vllm", "--workload", str(REF / "fcfs-chunked.workload.json"),
                      "--reference", str(REF / "fcfs-chunked.steps.jsonl"), "--output", str(out), *flag)
        assert res.returncode == 0, res.stderr
        report = reports[bool(flag)] = json.loads(out.read_text())
        assert report["steps_total"] == report["steps_identical"] == 897
        assert f"identical, {report['mirror_path']} path" in res.stdout
    fast, slow = reports[False], reports[True]
    assert (fast["mirror_path"], slow["mirror_path"]) == ("fast", "slow")
    assert slow["mirror_fast_path_steps"] == 0 and slow["mirror_full_steps"] == 896
    assert fast["mirror_fast_path_steps"] + fast["mirror_full_steps"] == 896
    assert fast["mirror_fast_path_steps"] > 10 * fast["mirror_full_steps"]
    assert fast["mirror_drain_steps"] == slow["mirror_drain_steps"] == 1
