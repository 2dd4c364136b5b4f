"""Scaling speed-ups change no decision.

The pinned values below were computed before the speed-ups (seed fast-forward,
the hand-written fingerprint serialiser, the streaming reader's fast checks)
and must never move: the fingerprint covers every scheduling decision and the
outcome digest every per-request tick and millisecond. The equivalence tests
replay the same input with fast-forward on and off.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, POLICIES, REPO, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickgate.seed.scheduler import SeedScheduler
from tickgate.interfaces.model import Request, TickRecord
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.replay.fingerprint import canonical_body
from tickgate.workload.sources import open_requests

TRACES = FIXTURES / "realdata" / "traces"
SEED_BENCH = REPO / "benchmarks" / "policies" / "seed-bench.yaml"
DEFAULT = POLICIES / "default.yaml"
#: pinned with the bench preset's sizing before issue 32 (fixtures/policies/README.md)
VLLM_BENCH = REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml"


def _run(path: Path, fmt: str, policy: Path, limit: int | None = None) -> dict[str, Any]:
    requests, inputs = open_requests(path, fmt, limit=limit)
    return replay(requests, load_policy(policy), inputs=inputs, detail_limit=10**7)


def _digest(report: dict[str, Any]) -> str:
    """Digest of the outcomes' values in the layout they were pinned in (the report
    now leaves out fields at their default, and shows a non-zero priority and, timed,
    admitted_ms)."""
    pinned_layout = []
    for entry in report["outcomes"]:
        entry = {k: v for k, v in entry.items() if k not in ("priority", "admitted_ms")}
        entry.setdefault("output_tokens", 0)
        entry.setdefault("prompt_tokens", 0)
        pinned_layout.append(entry)
    return hashlib.sha256(json.dumps(pinned_layout, sort_keys=True).encode()).hexdigest()[:16]


# (input, format, policy, limit) -> (fingerprint, total ticks, outcome digest, busy ms), computed before the speed-ups
PINNED = [
    (FIXTURES / "workload.json", "workload", DEFAULT, None, ("3a8939e35a618842", 11, "785df3e9d368c6a4", None)),
    (TRACES / "AzureLLMInferenceTrace_code.csv", "azure", SEED_BENCH, None,
     ("4c10a7ba0463edfc", 84031, "1473e7d1343540c4", 769381.488)),
    (TRACES / "mooncake_conversation_trace.jsonl", "mooncake", SEED_BENCH, 2000,
     ("ff8ace682a41513b", 45718, "426e3b19346cb697", 1868155.689)),
    (TRACES / "splitwise_sim_test_trace.csv", "splitwise", SEED_BENCH, None,
     ("b39abc99b104c22c", 59, "40c941066f44f9ac", 422.407)),
    # vllm-v1 with prefix caching on real prefix sharing (hit rate 7.7%), pinned
    # before per-run prefix keys and the prefix_block_runs spelling
    (TRACES / "mooncake_conversation_trace.jsonl", "mooncake", VLLM_BENCH, 3000,
     ("3ef3b9a6e08dbab2", 373555, "7a46956f51d934a0", 4704863.059)),
]


@pytest.mark.parametrize("path,fmt,policy,limit,expected", PINNED, ids=lambda v: getattr(v, "name", None))
def test_pinned_fingerprints_and_outcomes(path: Path, fmt: str, policy: Path, limit: int | None,
                                          expected: tuple[Any, ...]) -> None:
    report = _run(path, fmt, policy, limit)
    busy = report.get("latency", {}).get("busy_ms")
    assert (report["summary"]["trace_fingerprint"], report["summary"]["total_ticks"], _digest(report), busy) == expected


def test_reference_workload_fingerprint_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--output", str(out))
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text())["summary"]["trace_fingerprint"] == "3a8939e35a618842"


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """Everything but the per-record detail (a span is one record instead of several) and the
    inter-token gaps' figures but their count: a span gives its steps their mean (docs/report.md,
    "Inter-token latency"; the mean of the gaps is the same sum, see _same_gaps)."""
    out = {k: v for k, v in report.items() if k not in ("ticks", "ticks_omitted")}
    # the series' clock inside a span takes its steps as equally long (docs/report.md, "Series")
    out["series"] = {k: v for k, v in out["series"].items() if k != "ms"}
    itl = out.get("latency", {}).get("itl_ms")
    if itl:
        out["latency"] = {**out["latency"], "itl_ms": itl["count"]}
    return out


def _same_gaps(fast: dict[str, Any], slow: dict[str, Any]) -> None:
    """Spans and single steps: the same gaps' count and total, percentiles within a span's growth."""
    a, b = (r.get("latency", {}).get("itl_ms") for r in (fast, slow))
    assert (a is None) == (b is None)
    if a is not None:
        assert a["count"] == b["count"] and a["mean"] == pytest.approx(b["mean"], abs=2e-3)


def test_fast_forward_changes_nothing_on_a_real_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    path = TRACES / "AzureLLMInferenceTrace_code.csv"
    fast = _run(path, "azure", SEED_BENCH, 3000)
    monkeypatch.setattr(SeedScheduler, "fast_forward", False)
    slow = _run(path, "azure", SEED_BENCH, 3000)
    assert _comparable(fast) == _comparable(slow)
    _same_gaps(fast, slow)
    # and it is what makes cost follow events: far fewer records than steps
    assert len(slow["ticks"]) == slow["summary"]["total_ticks"] - slow["utilization"]["idle_ticks"]
    assert len(fast["ticks"]) * 4 < len(slow["ticks"])


_POLICY_TEMPLATE = """version: 1
scheduler:
  name: seed
  options: {{page_size: {page}, kv_pages: {pages}, prefill_budget: {budget}, decode_batch_width: {width},
             aging_ticks: {aging}}}
admission: {{name: priority-fcfs}}
kv_allocator: {{name: paged}}
{timing}"""

_requests = st.lists(st.tuples(st.integers(1, 300), st.integers(1, 60), st.integers(0, 2), st.integers(0, 40)),
                     min_size=1, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_requests, width=st.integers(1, 12), pages=st.integers(8, 80), budget=st.integers(16, 600),
       aging=st.integers(0, 5), timed=st.booleans(), ctx_ms=st.sampled_from([0.0, 0.001, 0.0137]),
       gap_ms=st.sampled_from([0.5, 3.3, 25.0]))
def test_fast_forward_equivalence_property(tmp_path: Path, rows: list[tuple[int, int, int, int]], width: int,
                                           pages: int, budget: int, aging: int, timed: bool, ctx_ms: float,
                                           gap_ms: float) -> None:
    timing = (f"timing: {{fixed_ms: 1.7, per_prefill_token_ms: 0.013, per_decode_seq_ms: 0.21, "
              f"per_context_token_ms: {ctx_ms}}}\n") if timed or ctx_ms else ""
    policy_path = tmp_path / "p.yaml"
    policy_path.write_text(_POLICY_TEMPLATE.format(page=16, pages=pages, budget=budget, width=width, aging=aging,
                                                   timing=timing))
    policy = load_policy(policy_path)
    t = 0
    requests = []
    for i, (prompt, out, prio, gap) in enumerate(rows):
        t += gap
        requests.append(Request(id=f"r{i:03d}", prompt_tokens=prompt, max_output_tokens=out, priority=prio,
                                arrival_tick=0 if timed else t, arrival_ms=t * gap_ms if timed else None))
    results = []
    for ff in (True, False):
        SeedScheduler.fast_forward = ff
        try:
            results.append(replay(list(requests), policy, detail_limit=10**6))
        finally:
            SeedScheduler.fast_forward = True
    assert _comparable(results[0]) == _comparable(results[1])
    _same_gaps(*results)
    if not ctx_ms and results[0].get("latency"):  # every step of a span costs the same: exact
        assert results[0]["latency"]["itl_ms"] == results[1]["latency"]["itl_ms"]


_ids = st.lists(st.text(min_size=1, max_size=6), max_size=4).map(tuple)


@settings(max_examples=200, deadline=None)
@given(admitted=_ids, decoded=_ids, completed=_ids, preempted=_ids, rejected=_ids,
       ints=st.lists(st.integers(0, 10**12), min_size=6, max_size=6),
       detail=st.none() | st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5) | st.lists(
           st.integers(), max_size=3), max_size=3))
def test_fingerprint_body_is_byte_identical_to_json_dumps(admitted: tuple[str, ...], decoded: tuple[str, ...],
                                                          completed: tuple[str, ...], preempted: tuple[str, ...],
                                                          rejected: tuple[str, ...], ints: list[int],
                                                          detail: dict[str, Any] | None) -> None:
    record = TickRecord(tick=0, admitted=admitted, decoded=decoded, completed=completed, preempted=preempted,
                        rejected=rejected, prefill_tokens=ints[0], decode_tokens=ints[1], queued=ints[2],
                        active=ints[3], kv_pages_used=ints[4], kv_pages_reserved=ints[5], detail=detail)
    assert canonical_body(record) == json.dumps(record.canonical(), sort_keys=True, separators=(",", ":"))


def test_import_then_replay_equals_direct_replay_and_is_byte_identical(tmp_path: Path) -> None:
    """The done-when pipeline on a slice of the real Mooncake trace; outputs do
    not depend on PYTHONHASHSEED; --input-format streams to the same result."""
    trace = TRACES / "mooncake_conversation_trace.jsonl"
    outputs = []
    for seed in ("0", "12345"):
        env = {"PYTHONHASHSEED": seed}
        d = tmp_path / seed
        d.mkdir()
        res = run_cli("import", "mooncake", str(trace), "--limit", "400", "--output", "w.json", env=env, cwd=d)
        assert res.returncode == 0, res.stderr
        res = run_cli("replay", "--input", "w.json", "--policy", str(SEED_BENCH), "--output", "r.json",
                      "--trace", "t.jsonl", env=env, cwd=d)
        assert res.returncode == 0, res.stderr
        outputs.append(tuple((d / name).read_bytes() for name in ("w.json", "r.json", "t.jsonl")))
    assert outputs[0] == outputs[1]
    report = json.loads(outputs[0][1])
    direct = _run(trace, "mooncake", SEED_BENCH, 400)
    assert direct["summary"] == report["summary"]
    assert report["summary"]["request_count"] == 400 == report["summary"]["completed_requests"]
    trace_lines = [json.loads(line) for line in outputs[0][2].splitlines()]
    assert sum(t["span"] for t in trace_lines) == report["utilization"]["busy_ticks"]


def test_benchmark_generator_is_seeded(tmp_path: Path) -> None:
    gen = REPO / "benchmarks" / "gen_mooncake.py"
    outs = []
    for name in ("a", "b"):
        subprocess.run([sys.executable, str(gen), "--n", "200", "--seed", "3", "--out", str(tmp_path / name)],
                       check=True, env={**os.environ, "PYTHONHASHSEED": name == "a" and "1" or "2"})
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1]
    rows = [json.loads(line) for line in outs[0].splitlines()]
    assert len(rows) == 200
    assert all(64 <= r["input_length"] <= 2048 and 16 <= r["output_length"] <= 512 for r in rows)
    assert all(len(r["hash_ids"]) == -(-r["input_length"] // 16) for r in rows)
    ids = [i for r in rows for i in r["hash_ids"]]
    assert len(ids) == len(set(ids))
    ts = [r["timestamp"] for r in rows]
    assert ts == sorted(ts) and 40_000 < ts[-1] < 100_000  # ~200 / 3 req/s = 67 s
