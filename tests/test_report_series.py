"""The report's down-sampled ``series`` (tickgate.replay.series, docs/report.md "Series"):
bounded, covering the whole run, maxima kept, spans the same as single steps, the clock
the engine's own, the same bytes in another process."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, POLICIES
from tickgate.interfaces import Clock
from tickgate.interfaces.model import Request, TickRecord
from tickgate.host.policy import load_policy
from tickgate.replay.engine import build_scheduler, run
from tickgate.simulate import replay
from tickgate.replay.series import MAX_POINTS, Series

ROOT = Path(__file__).resolve().parents[1]


def steps(seed: int, n: int, *, spans: bool, gaps: bool) -> list[TickRecord]:
    """A seeded stream of records: values that wander, spans of up to 40 steps, idle jumps."""
    rng = random.Random(seed)
    tick, kv, out = 0, 0, []
    for _ in range(n):
        if gaps and rng.random() < 0.02:
            tick += rng.randint(1, 500)
        span = rng.randint(1, 40) if spans and rng.random() < 0.3 else 1
        kv = max(0, kv + rng.randint(-30, 31))
        out.append(TickRecord(tick=tick, span=span, kv_pages_used=kv, queued=rng.randint(0, 9),
                              active=rng.randint(0, 64), duration_ms=rng.uniform(1.0, 30.0)))
        tick += span
    return out


def fold(records: list[TickRecord], points: int = MAX_POINTS) -> dict[str, Any]:
    series = Series(points)
    for r in records:
        series.record(r)
    return series.to_json()


def single_steps(records: list[TickRecord]) -> list[TickRecord]:
    return [TickRecord(tick=r.tick + k, kv_pages_used=r.kv_pages_used, queued=r.queued, active=r.active,
                       duration_ms=r.duration_ms / r.span) for r in records for k in range(r.span)]


def test_a_short_run_keeps_every_step() -> None:
    records = steps(1, 100, spans=False, gaps=False)
    s = fold(records)
    assert s["bucket_steps"] == 1 and s["points"] == 100
    assert s["tick"] == [r.tick for r in records]
    assert s["kv_pages_used"]["max"] == s["kv_pages_used"]["mean"] == [r.kv_pages_used for r in records]
    assert s["queued"]["max"] == [r.queued for r in records]
    assert s["active"]["max"] == [r.active for r in records]


@pytest.mark.parametrize("spans", [False, True])
@pytest.mark.parametrize("gaps", [False, True])
def test_bounded_covering_and_maxima_kept(spans: bool, gaps: bool) -> None:
    records = steps(2, 60_000, spans=spans, gaps=gaps)
    s = fold(records)
    last = records[-1].tick + records[-1].span - 1
    assert MAX_POINTS // 2 <= s["points"] <= MAX_POINTS if not gaps else s["points"] <= MAX_POINTS
    width = s["bucket_steps"]
    assert width * MAX_POINTS > last >= width * MAX_POINTS // 2  # no wider than needed
    # the whole run: from the first step, to a bucket that holds the last, every busy step counted
    assert s["tick"][0] == records[0].tick
    assert s["tick"][-1] <= last < s["tick"][-1] // s["bucket_steps"] * s["bucket_steps"] + s["bucket_steps"]
    assert sum(s["steps"]) == sum(r.span for r in records)
    assert s["tick"] == sorted(set(s["tick"]))
    for name in ("kv_pages_used", "queued", "active"):
        values = [getattr(r, name) for r in records]
        assert max(s[name]["max"]) == max(values)
        assert min(s[name]["max"]) >= min(values)
        weighted = sum(m * n for m, n in zip(s[name]["mean"], s["steps"])) / sum(s["steps"])
        exact = sum(getattr(r, name) * r.span for r in records) / sum(s["steps"])
        assert weighted == pytest.approx(exact, abs=5e-4)  # means kept to 3 decimals
        assert all(mean <= top for mean, top in zip(s[name]["mean"], s[name]["max"]))


def test_the_same_records_the_same_series() -> None:
    a, b = fold(steps(3, 20_000, spans=True, gaps=True)), fold(steps(3, 20_000, spans=True, gaps=True))
    assert json.dumps(a) == json.dumps(b)
    assert a != fold(steps(4, 20_000, spans=True, gaps=True))


@pytest.mark.parametrize("n", [30, 5_000])
def test_a_span_counts_as_its_steps(n: int) -> None:
    spanned = steps(5, n, spans=True, gaps=True)
    a, b = fold(spanned), fold(single_steps(spanned))
    assert a["points"] == b["points"] and a["bucket_steps"] == b["bucket_steps"]
    assert {k: v for k, v in a.items() if k != "ms"} == {k: v for k, v in b.items() if k != "ms"}
    # equal steps inside a span: the same clock, but for rounding
    assert a["ms"] == pytest.approx(b["ms"], rel=1e-9)


def test_an_untimed_run_has_no_clock() -> None:
    s = fold([TickRecord(tick=t, kv_pages_used=t) for t in range(10)])
    assert "ms" not in s and s["points"] == 10


def test_points_must_merge_pairwise() -> None:
    with pytest.raises(ValueError):
        Series(7)


class _ClockAtRecords:
    """A sink reading the engine's clock when each record comes (the step's start)."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.starts = clock, []

    def arrival(self, request: Request) -> None:
        pass

    def outcome(self, outcome: Any) -> None:
        pass

    def record(self, record: TickRecord) -> None:
        self.starts.append(self.clock.now_ms)


def test_the_clock_is_the_engines_with_idle_jumps(tmp_path: Path) -> None:
    """Bursts with idle gaps between them, one bucket per step (a short run): each bucket's
    ms is the engine clock at that step's start, to the 3 decimals the report keeps."""
    reqs = [Request(id=f"r{i:02d}", prompt_tokens=40 + i, max_output_tokens=3 + i % 4,
                    arrival_ms=(i // 4) * 400.0 + (i % 4) * 1.5) for i in range(24)]
    policy = load_policy(POLICIES / "vllm-v1-bench.yaml")
    clock = Clock()
    scheduler, _ = build_scheduler(policy, clock)
    series, probe = Series(), _ClockAtRecords(clock)

    class _Sink(_ClockAtRecords):
        def arrival(self, request: Request) -> None:
            series.arrival(request.arrival_ms)

        def record(self, record: TickRecord) -> None:
            series.record(record)

    run(reqs, scheduler, clock, [probe, _Sink(clock)], timed=True, timing=policy.timing)
    s = series.to_json()
    assert s["bucket_steps"] == 1 and s["points"] == len(probe.starts) < MAX_POINTS
    assert s["ms"] == [round(t, 3) for t in probe.starts]
    assert series.now_ms == clock.now_ms  # bit for bit: the same additions and jumps
    assert clock.idle_ms > 0  # there were jumps to follow


def test_a_report_carries_the_whole_run_past_its_detail_limit() -> None:
    workload = _workload()
    report = replay(workload, load_policy(POLICIES / "vllm-v1-bench.yaml"), detail_limit=50)
    s, busy = report["series"], report["utilization"]["busy_ticks"]
    assert len(report["ticks"]) == 50 and report["ticks_omitted"] > 0
    assert sum(s["steps"]) == busy and s["points"] <= MAX_POINTS
    assert max(s["kv_pages_used"]["max"]) == report["summary"]["peak_kv_pages"]
    assert max(s["queued"]["max"]) == report["pressure"]["queue"]["peak"]
    assert max(s["active"]["max"]) == report["pressure"]["active"]["peak"]
    # the clock: from the first arrival, past the last one (the last steps serve it), never back
    assert s["ms"][0] == workload[0].arrival_ms and s["ms"][-1] > workload[-1].arrival_ms
    assert s["ms"] == sorted(s["ms"])


def _workload() -> list[Request]:
    from tickgate.workload.sources import open_requests

    requests, _ = open_requests(FIXTURES / "realdata" / "traces" / "AzureLLMInferenceTrace_code.csv", "azure",
                                block_size=None, limit=300)
    return list(requests)


def test_the_series_is_the_same_bytes_in_another_process(tmp_path: Path) -> None:
    """Two fresh interpreters with different hash seeds, with and without the sidecar child."""
    outs = []
    for seed, parallel in (("1", "0"), ("2", "1")):
        out = tmp_path / f"r{seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": seed, "TICKGATE_PARALLEL": parallel}
        subprocess.run([sys.executable, "-m", "tickgate", "replay", "--input",
                        str(FIXTURES / "realdata" / "traces" / "AzureLLMInferenceTrace_code.csv"),
                        "--input-format", "azure", "--limit", "400", "--policy",
                        str(POLICIES / "vllm-v1-bench.yaml"), "--output", str(out), "--quiet"],
                       check=True, env=env, cwd=ROOT)
        outs.append(json.loads(out.read_text())["series"])
    assert outs[0] == outs[1] and outs[0]["points"] > 0
