"""A run gated against itself promotes, whatever failed in it.

Evidence absent on *both* sides of a pair (a rejected request's timings, a
one-token output's inter-token gap, KV pressure no client records) says
nothing against either run: it is left out, and a signal whose evidence no
pair has on either side is not evaluated. Only evidence one side lacks holds.
Checked for every reader that can be gated: each benchmark client's file with
failed requests, and replay reports of every scheduler and fleet layout with
rejected requests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from client_files_helpers import CASES, SMALL

from conftest import REPO, run_cli
from tickgate.gate.pipeline import gate_files

MOONCAKE = REPO / "fixtures" / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
POLICIES = REPO / "policies"


def _self_gate(policy: Path, path: Path) -> dict[str, Any]:
    return gate_files(policy, baseline=path, candidate=path)


def _failed(report: dict[str, Any]) -> int:
    errors = next(s for s in report["signals"] if s["signal"] == "error-rate")
    return int(errors["evidence"]["baseline_errors"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_client_file_with_failed_requests_promotes_against_itself(name, tmp_path):
    case = CASES[name]
    broken = case["errors"](case["baseline"], tmp_path / f"errors{case['baseline'].suffix}")
    # the small-sample policy: these runs have 200 requests, and with failures fewer than the
    # 200 usable pairs the default policy's p95 needs (that holds as insufficient data, rightly)
    report = _self_gate(SMALL, broken)
    assert _failed(report) > 0  # the file does record failures
    assert report["decision"] == "promote", report["triage"]
    assert report["exit_code"] == 0


def _replay(policy: Path, out: Path, limit: int = 300) -> dict[str, Any]:
    result = run_cli(
        "replay", "--input", str(MOONCAKE), "--input-format", "mooncake", "--limit", str(limit),
        "--policy", str(policy), "--output", str(out),
    )
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())


#: each engine's KV pool size option, and a size too small for the longest Mooncake prompts
KV_SIZE = {"num_gpu_blocks": "1024", "max_total_tokens": "16384", "kv_cache_max_tokens": "16384"}


def _small_kv(src: Path, out: Path) -> Path:
    """The preset with a KV pool too small for the longest Mooncake prompts, so some requests
    are rejected (the self-gate must promote anyway)."""
    lines = src.read_text().splitlines()
    found = False
    for i, line in enumerate(lines):
        key = line.strip().split(":")[0]
        if key in KV_SIZE:
            lines[i] = f"{line.split(':')[0]}: {KV_SIZE[key]}"
            found = True
    assert found, f"{src}: no KV size option"
    out.write_text("\n".join(lines) + "\n")
    return out


SINGLE = ["vllm-v1-bench", "sglang-default", "trtllm-max-utilization", "trtllm-guaranteed-no-evict"]
FLEETS = ["fleet-round-robin", "fleet-least-loaded", "fleet-prefix-aware", "fleet-dp", "fleet-pd"]


@pytest.mark.parametrize("preset", SINGLE + FLEETS)
def test_a_replay_report_with_rejections_promotes_against_itself(preset, tmp_path):
    policy = _small_kv(POLICIES / f"{preset}.yaml", tmp_path / f"{preset}.yaml")
    report_path = tmp_path / "replay.json"
    _replay(policy, report_path)
    gate = _self_gate(POLICIES / "gate-default.yaml", report_path)
    assert _failed(gate) > 0, f"{preset}: no request was rejected; the case tests nothing"
    assert gate["decision"] == "promote", gate["triage"]
    assert gate["join"]["matched"] == 300


def test_the_issue_case_promotes_from_the_command_line(tmp_path):
    """The issue's command (`replay ... --limit 300` under the 2,048-block vLLM preset of then, now
    the toy copy) rejects requests; gated against itself it exits 0."""
    out = tmp_path / "r.json"
    report = _replay(REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml", out)
    assert report["summary"]["completed_requests"] < report["summary"]["request_count"]
    result = run_cli("gate", "--baseline", str(out), "--candidate", str(out), "--output", str(tmp_path / "g.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("promote")


def test_evidence_one_side_lacks_still_holds_when_some_pairs_have_it_on_neither(tmp_path):
    """Pairs without the figure on both sides are left out; a pair where only the candidate
    lacks it is missing evidence and holds."""
    rows = []
    for i in range(300):
        row: dict[str, Any] = {"request_id": f"r{i:04d}", "latency_ms": 100.0 + i % 17, "ttft_ms": 10.0 + i % 5}
        if i % 3:  # a third of the requests have one output token: no gap on either side
            row["itl_p95_ms"] = 5.0 + i % 7
        rows.append(row)
    doc = {"version": 1, "kind": "tickgate.observations", "run": {"label": "x"}, "requests": rows}
    base = tmp_path / "b.json"
    base.write_text(json.dumps(doc))
    same = _self_gate(POLICIES / "gate-default.yaml", base)
    decode = next(s for s in same["signals"] if s["signal"] == "decode-token-p95")
    assert decode["status"] == "pass" and decode["evidence"]["recorded_by_neither"] == 100
    assert same["decision"] == "promote", same["triage"]
    cand_rows = [dict(r) for r in rows]
    cand_rows[1].pop("itl_p95_ms")  # the candidate lost one figure the baseline has
    cand = tmp_path / "c.json"
    cand.write_text(json.dumps({**doc, "requests": cand_rows}))
    one_sided = gate_files(POLICIES / "gate-default.yaml", baseline=base, candidate=cand)
    decode = next(s for s in one_sided["signals"] if s["signal"] == "decode-token-p95")
    assert decode["status"] == "hold" and decode["reason"] == "missing_evidence"
    assert decode["evidence"]["missing"] == 1
