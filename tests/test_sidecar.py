"""Fingerprint and summary in a forked child (tickgate.replay.sidecar): the same report,
byte for byte, for every scheduler; children always cleaned up; failures clear."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from conftest import FIXTURES, POLICIES, children, run_cli
from tickgate.util.errors import InputError, TickgateError
from tickgate.interfaces.model import Request, RequestOutcome, TickRecord
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.replay.fingerprint import FingerprintSink
from tickgate.replay.report import SummarySink
from tickgate.replay.sidecar import BATCH, Sidecar
from tickgate.workload.sources import open_requests

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the sidecar needs fork")

TRACES = FIXTURES / "realdata" / "traces"
CASES = [
    (FIXTURES / "workload.json", "workload", POLICIES / "default.yaml", None),
    (TRACES / "mooncake_conversation_trace.jsonl", "mooncake", POLICIES / "vllm-v1-bench.yaml", 400),
    (TRACES / "AzureLLMInferenceTrace_code.csv", "azure", POLICIES / "vllm-v1-bench.yaml", 500),
    (TRACES / "splitwise_sim_test_trace.csv", "splitwise", POLICIES / "default.yaml", None),
]
CASES += [(FIXTURES / "scenarios" / name, "workload", policy, None)
          for name in ("shared-prefix.json", "kv-pressure.json", "trtllm-capacity.json")
          for policy in sorted(POLICIES.glob("*.yaml")) if not policy.name.startswith("gate")]


def _report(path: Path, fmt: str, policy: Path, limit: int | None, sidecar: bool) -> str:
    requests, inputs = open_requests(path, fmt, limit=limit)
    try:
        report = replay(requests, load_policy(policy), inputs=inputs, detail_limit=50, sidecar=sidecar)
    except InputError as exc:  # a policy that refuses the workload refuses it either way
        return f"error: {exc}"
    return json.dumps(report, sort_keys=True)


@pytest.mark.parametrize("path,fmt,policy,limit", CASES,
                         ids=[f"{c[0].name}-{c[2].name}" for c in CASES])
def test_reports_are_identical(path: Path, fmt: str, policy: Path, limit: int | None) -> None:
    assert _report(path, fmt, policy, limit, True) == _report(path, fmt, policy, limit, False)
    assert not children()


def test_cli_report_and_trace_are_identical(tmp_path: Path) -> None:
    out = {}
    for setting in ("0", "1"):
        report, trace = tmp_path / f"r{setting}.json", tmp_path / f"t{setting}.jsonl"
        res = run_cli("replay", "--input", str(TRACES / "mooncake_conversation_trace.jsonl"), "--input-format",
                      "mooncake", "--limit", "300", "--policy", str(POLICIES / "vllm-v1-bench.yaml"),
                      "--output", str(report), "--trace", str(trace), env={**os.environ, "TICKGATE_PARALLEL": setting})
        assert res.returncode == 0, res.stderr
        out[setting] = (report.read_bytes(), trace.read_bytes(), res.stdout.replace(str(report), "R"))
    assert out["0"] == out["1"]


class _Odd(tuple):  # marshal refuses subclasses: the batch goes by pickle
    pass


def _events(n: int) -> list[tuple[str, object]]:
    events: list[tuple[str, object]] = []
    for i in range(n):
        events.append(("arrival", Request(id=f"r{i}", prompt_tokens=10 + i, max_output_tokens=2,
                                          tenant=f"t{i % 3}", lane="a" if i % 2 else None)))
        detail = {"odd": _Odd((i, "x"))} if i == n // 2 else ({"k": [i, "v", 1.5]} if i % 3 else None)
        events.append(("record", TickRecord(tick=i, admitted=(f"r{i}",), decoded=(f"r{i}",), decode_tokens=1,
                                            active=i % 5, kv_pages_used=i, span=1 + i % 4,
                                            duration_ms=0.5 * i, detail=detail)))
        events.append(("outcome", RequestOutcome(id=f"r{i}", status="completed", arrival_tick=i, admitted_tick=i,
                                                 first_token_tick=i + 1, finished_tick=i + 2, output_tokens=2,
                                                 prompt_tokens=10 + i, tenant=f"t{i % 3}", arrival_ms=float(i),
                                                 first_token_ms=i + 0.5, finished_ms=i + 1.5)))
    return events


def _feed(sinks: list, events: list) -> None:
    for kind, value in events:
        for sink in sinks:
            getattr(sink, kind)(value)


def test_any_detail_and_every_event_kind_arrive(tmp_path: Path) -> None:
    events = _events(3 * BATCH + 7)
    fingerprint, summary = FingerprintSink(), SummarySink(detail_limit=40)
    _feed([fingerprint, summary], events)
    side = Sidecar(detail_limit=40)
    _feed([side], events)
    digest, remote = side.finish()
    assert digest == fingerprint.hexdigest()
    args = dict(total_ticks=9, kv_capacity=10, decode_slots=4, final_kv=0, fingerprint=digest, extra={},
                built={}, inputs={}, timed=True, busy_ms=1.0)
    assert remote.report(**args) == summary.report(**args)
    assert not children()


def test_closing_early_stops_the_child() -> None:
    side = Sidecar(detail_limit=10)
    _feed([side], _events(2 * BATCH))
    assert len(children()) == 1
    side.close()
    assert not children()


def test_a_child_that_dies_is_a_clear_error() -> None:
    side = Sidecar(detail_limit=10)
    (child,) = children()
    os.kill(child, signal.SIGKILL)
    with pytest.raises(TickgateError, match=r"was killed by signal 9; TICKGATE_PARALLEL=0 computes them"):
        side.finish()
    assert not children()


def test_a_failing_replay_leaves_no_child(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text((POLICIES / "vllm-v1-bench.yaml").read_text() + "limits:\n  max_ticks: 50\n")
    requests, inputs = open_requests(TRACES / "mooncake_conversation_trace.jsonl", "mooncake", limit=50)
    with pytest.raises(InputError, match="tick limit of 50"):
        replay(requests, load_policy(policy), inputs=inputs, sidecar=True)
    assert not children()


def test_helper_pipes_hold_a_mebibyte_where_the_system_allows() -> None:
    """A burst of records fills a default 64 KiB pipe in well under a millisecond."""
    import fcntl
    import os

    from tickgate.parallel.frames import PIPE_BYTES, pipe

    if not hasattr(fcntl, "F_GETPIPE_SZ"):
        pytest.skip("pipe sizes are Linux's")
    read_fd, write_fd = pipe()
    try:
        assert fcntl.fcntl(write_fd, fcntl.F_GETPIPE_SZ) == PIPE_BYTES
    finally:
        os.close(read_fd)
        os.close(write_fd)
