"""The gate on what real benchmark clients write, run after run.

The files in fixtures/realdata/clients are real output of vllm bench serve 0.33,
sglang.bench_serving 0.5.23, aiperf 0.13 and genai-perf 0.0.16 against a local
server whose candidate profile streams 20 % slower (SOURCES.txt there). Where a
test needs a file no run produced (a run with HTTP 500s, a genai-perf slow run,
another dataset), it edits a copy of a real one in the way the tool itself
writes that case; each editing function says what it changes and why it is
faithful.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from client_files_helpers import (
    AIPERF,
    CASES,
    DEFAULT,
    GENAI,
    LATENCY_SIGNALS,
    SMALL,
    aiperf_fresh_ids,
    genai_slower,
)

from conftest import run_cli
from tickgate.gate.pipeline import gate_files


def _gate(policy: Path, baseline: Path, candidate: Path) -> dict[str, Any]:
    return gate_files(policy, baseline=baseline, candidate=candidate)


def _slow(name: str, tmp_path: Path) -> Path:
    case = CASES[name]
    return case["slow"] or genai_slower(case["baseline"], tmp_path / "slow.json")


def _deciding(report: dict[str, Any]) -> set[str]:
    return {t["signal"] for t in report["triage"] if not t["dry_run"]}


@pytest.mark.parametrize("name", CASES)
def test_a_run_gated_against_itself_promotes(name):
    case = CASES[name]
    report = _gate(case["policy"], case["baseline"], case["baseline"])
    assert report["inputs"]["baseline"]["format"] == name  # auto-detected
    assert report["join"]["matched"] == case["matched"]
    assert report["decision"] == "promote", report["triage"]
    # nobody records KV pressure: reported, not a reason to hold
    assert "memory-pressure" in {n["signal"] for n in report["not_evaluated"]}


@pytest.mark.parametrize("name", CASES)
def test_the_slower_candidate_holds_on_latency(name, tmp_path):
    case = CASES[name]
    report = _gate(case["policy"], case["baseline"], _slow(name, tmp_path))
    assert report["decision"] == "hold"
    assert report["join"]["matched"] == case["matched"]
    assert _deciding(report) & LATENCY_SIGNALS
    assert _deciding(report) <= LATENCY_SIGNALS, report["triage"]  # nothing but latency is wrong
    latency = next(s for s in report["signals"] if s["signal"] == "latency-p95")
    assert latency["reason"] == "regression" and 0.15 < latency["delta"] < 0.25


@pytest.mark.parametrize("name", CASES)
def test_http_errors_on_the_candidate_roll_back(name, tmp_path):
    case = CASES[name]
    suffix = case["baseline"].suffix
    broken = case["errors"](case["baseline"], tmp_path / f"errors{suffix}")
    report = _gate(case["policy"], case["baseline"], broken)
    assert report["decision"] == "rollback"
    assert "error-rate" in _deciding(report)
    error_rate = next(s for s in report["signals"] if s["signal"] == "error-rate")
    assert error_rate["evidence"]["candidate_errors"] > 0 and error_rate["evidence"]["baseline_errors"] == 0


@pytest.mark.parametrize("name", CASES)
def test_exit_codes_from_the_command_line(name, tmp_path):
    case = CASES[name]
    policy = ["--policy", str(case["policy"])]
    out = tmp_path / "report.json"
    same = run_cli("gate", *policy, "--baseline", str(case["baseline"]), "--candidate", str(case["baseline"]),
                   "--output", str(out))
    assert same.returncode == 0, same.stderr
    assert "not evaluated memory-pressure: neither side records memory_pressure" in same.stdout
    slow = run_cli("gate", *policy, "--baseline", str(case["baseline"]), "--candidate", str(_slow(name, tmp_path)),
                   "--output", str(out))
    assert slow.returncode == 10, slow.stderr
    assert "latency-p95" in slow.stdout.splitlines()[0]


def test_a_detailed_vllm_result_is_detected_though_its_summary_starts_past_64_kib():
    from tickgate.gate.detect import detect_format

    path = CASES["vllm-bench"]["baseline"]
    assert path.read_text().index('"mean_ttft_ms"') > 65536
    assert detect_format(path).name == "vllm-bench"


def test_two_aiperf_runs_join_on_the_dataset_entry_not_the_fresh_request_id(tmp_path):
    base = CASES["aiperf"]["baseline"]
    second = aiperf_fresh_ids(base, tmp_path / "second.jsonl")
    report = _gate(SMALL, base, second)
    assert report["join"]["matched"] == 80
    assert report["decision"] == "promote"


def test_an_aiperf_conversation_sent_twice_is_numbered_in_issue_order(tmp_path):
    from tickgate.gate.detect import read_observations

    lines = CASES["aiperf"]["baseline"].read_text().splitlines()
    first, again = json.loads(lines[0]), json.loads(lines[0])
    again["metadata"]["x_request_id"] = "another-uuid"
    again["metadata"]["request_start_ns"] += 10**9
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join([json.dumps(again), *lines]) + "\n")  # the later send written first
    doc = read_observations(path)
    conv = first["metadata"]["conversation_id"]
    ids = {r["request_id"]: r for r in doc["requests"]}
    assert f"{conv}:0" in ids and f"{conv}:0#2" in ids
    assert ids[f"{conv}:0#2"]["start_ms"] > ids[f"{conv}:0"]["start_ms"]


def _vllm_shuffled(tmp_path: Path) -> Path:
    """A run on another dataset draw: the same request count, the prompts in another order
    (so another prompt length at many positions)."""
    obj = json.loads(CASES["vllm-bench"]["baseline"].read_text())
    order = list(range(len(obj["input_lens"])))
    order = order[7:] + order[:7]
    for key in ("input_lens", "output_lens", "ttfts", "itls", "latencies", "generated_texts", "errors"):
        obj[key] = [obj[key][i] for i in order]
    out = tmp_path / "other_dataset.json"
    out.write_text(json.dumps(obj))
    return out


def test_requests_with_the_same_position_but_other_prompts_are_not_compared(tmp_path):
    report = _gate(DEFAULT, CASES["vllm-bench"]["baseline"], _vllm_shuffled(tmp_path))
    """Most prompts are 128 tokens long, so many shifted positions still agree on the length:
    one disagreement is enough to distrust every pair (their outputs differ too, and comparing
    them would be a false rollback)."""
    mismatches = report["join"]["prompt_mismatches"]
    assert 0 < mismatches["count"] < 200
    assert report["join"]["matched"] == 0
    matched = next(s for s in report["signals"] if s["signal"] == "matched-traffic")
    assert matched["status"] == "hold" and matched["reason"] == "mismatched_requests"
    assert "not the same requests" in matched["message"]
    assert report["decision"] == "hold"  # never a rollback on unrelated requests


def test_genai_perf_prompts_are_hashed_so_another_dataset_order_is_caught(tmp_path):
    obj = json.loads(CASES["genai-perf"]["baseline"].read_text())
    reqs = obj["experiments"][0]["requests"]
    payloads = [r["request_inputs"]["payload"] for r in reqs]
    for r, p in zip(reqs, payloads[1:] + payloads[:1]):
        r["request_inputs"]["payload"] = p
    other = tmp_path / "other.json"
    other.write_text(json.dumps(obj))
    report = _gate(SMALL, CASES["genai-perf"]["baseline"], other)
    assert report["join"]["prompt_mismatches"]["count"] == 80
    assert report["join"]["matched"] == 0
    assert report["decision"] == "hold"


def test_genai_perf_times_agree_with_genai_perf_own_summary():
    """tickgate's reading of profile_export.json against the summary genai-perf computed from
    the same file (profile_export_genai_perf.json, ms)."""
    from tickgate.gate.detect import read_observations

    mine = read_observations(CASES["genai-perf"]["baseline"])["run"]["aggregates"]
    theirs = json.loads((GENAI / "profile_export_genai_perf.json").read_text())
    assert mine["request_count"] == 80
    assert mine["ttft_ms"]["mean"] == pytest.approx(theirs["time_to_first_token"]["avg"], rel=1e-6)
    assert mine["latency_ms"]["mean"] == pytest.approx(theirs["request_latency"]["avg"], rel=1e-6)
    assert mine["latency_ms"]["p99"] == pytest.approx(theirs["request_latency"]["p99"], rel=1e-6)


def test_a_required_signal_without_evidence_holds(tmp_path):
    text = DEFAULT.read_text().replace("    - name: memory-pressure\n",
                                       "    - name: memory-pressure\n      required: true\n")
    policy = tmp_path / "required.yaml"
    policy.write_text(text)
    base = CASES["vllm-bench"]["baseline"]
    report = _gate(policy, base, base)
    assert report["decision"] == "hold"
    signal = next(s for s in report["signals"] if s["signal"] == "memory-pressure")
    assert signal["status"] == "hold" and signal["message"].startswith("required, but neither side records")


def test_evidence_on_one_side_only_still_holds(tmp_path):
    """Fail closed: memory_pressure recorded by the baseline alone is missing evidence."""
    from tickgate.gate.detect import read_observations

    doc = read_observations(CASES["vllm-bench"]["baseline"])
    with_pressure = copy.deepcopy(doc)
    for r in with_pressure["requests"]:
        r["memory_pressure"] = 0.5
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(with_pressure))
    b.write_text(json.dumps(doc))
    report = _gate(DEFAULT, a, b)
    signal = next(s for s in report["signals"] if s["signal"] == "memory-pressure")
    assert signal["status"] == "hold" and signal["reason"] == "missing_evidence"
    assert report["decision"] == "hold"


def test_a_gate_where_nothing_could_be_evaluated_holds(tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text("version: 1\ngate:\n  signals:\n    - name: memory-pressure\n")
    base = CASES["vllm-bench"]["baseline"]
    report = _gate(policy, base, base)
    assert report["decision"] == "hold"
    assert report["summary"] == "hold: no deciding signal could be evaluated"


@pytest.mark.parametrize("path,fmt", [
    (AIPERF / "aiperf_chat_baseline" / "profile_export_aiperf.json", "aiperf"),
    (AIPERF / "aiperf_chat_baseline" / "profile_export_aiperf.csv", "aiperf"),  # 0.13 adds a 'sum' column
    (GENAI / "profile_export_genai_perf.json", "genai-perf"),
    (GENAI / "profile_export_genai_perf.csv", "genai-perf"),
])
def test_the_clients_summary_files_are_aggregate_only_evidence(path, fmt):
    from tickgate.gate.detect import read_observations

    doc = read_observations(path)
    assert doc["run"]["provenance"]["format"] == fmt and "requests" not in doc
    agg = doc["run"]["aggregates"]
    assert agg["request_count"] == 80
    per_request = read_observations(CASES[fmt]["baseline"])["run"]["aggregates"]
    # the tool's own summary of the run agrees with tickgate's reading of its per-request file
    assert agg["latency_ms"]["p95"] == pytest.approx(per_request["latency_ms"]["p95"], rel=0.01)
