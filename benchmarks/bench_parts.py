"""Where a replay's time goes: reading, scheduling, the engine loop, the sinks.

    python benchmarks/bench_parts.py W.json                         # the toy vllm-v1 policy
    python benchmarks/bench_parts.py W.json --policy policies/default.yaml
    python benchmarks/bench_parts.py W.json --pipeline              # + the replay command's floor

``bench_replay.py`` times what a user runs; this splits one replay into its
parts, in one process, each timed on its own:

1. **read**: the workload reader, every request into a list;
2. **schedule**: the engine loop with the policy's scheduler and no sinks (the
   records and outcomes are kept);
3. **engine floor**: the same loop with a stand-in scheduler that hands back the
   kept records: what the loop costs with scheduling free;
4. **sinks**: the stand-in again, with the fingerprint and summary sinks: their
   cost is this minus the floor (a large replay runs them in a helper process).

So "schedule" minus "engine floor" is the scheduler's own cost, per record and
per request: the part no helper process can take off the replaying process.
The fingerprints of (4) and of a normal replay must agree; the script checks it.

``--pipeline`` adds what a user runs, ``tickgate replay --input W.json --policy P
--output R.json`` (in this process, with the helper processes a large replay
forks: docs/workload.md, "Large replays"), twice: with the policy's scheduler,
and with the stand-in handing back the kept records. The second is the floor of
the whole replay command: reading, the engine loop, handing records to the
sidecar, fingerprint, summary and report, with scheduling free. Both reports
must be byte-identical; the script checks it.
It keeps every record in memory: use it on workloads up to ~100k requests.
A script, not a test: wall-clock figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


class _Replayer:
    """A scheduler that returns records recorded from a real one, in order. The
    engine asks for outcomes once after every step, so that call moves it on."""

    def __init__(self, records: list[Any], outcomes: list[list[Any]]) -> None:
        self.records = records
        self.outcomes = outcomes
        self.i = 0

    def add(self, request: Any) -> None:
        pass

    def has_work(self) -> bool:
        return self.i < len(self.records)

    def step(self, horizon: Any) -> Any:
        return self.records[self.i]

    def pop_outcomes(self) -> list[Any]:
        out = self.outcomes[self.i]
        self.i += 1
        return out


class _Replaying(_Replayer):
    """:class:`_Replayer` answering the report's questions as the real scheduler did."""

    def __init__(self, records: list[Any], outcomes: list[list[Any]], real: Any) -> None:
        super().__init__(records, outcomes)
        self.answers = (real.kv_capacity_pages(), real.decode_slots_per_tick(), real.kv_used_pages(),
                        real.extra_summary())

    def kv_capacity_pages(self) -> int:
        return self.answers[0]  # type: ignore[no-any-return]

    def decode_slots_per_tick(self) -> int:
        return self.answers[1]  # type: ignore[no-any-return]

    def kv_used_pages(self) -> int:
        return self.answers[2]  # type: ignore[no-any-return]

    def extra_summary(self) -> Any:
        return self.answers[3]


def _replay_command(workload: Path, policy: Path, output: Path, scheduler: Any) -> float:
    """Wall seconds of ``tickgate replay`` run in this process; ``scheduler``, if
    given, stands in for the policy's (``tickgate.replay.run.build_scheduler``)."""
    import tickgate.replay.run
    from tickgate.commands.cli import main as cli

    build = tickgate.replay.run.build_scheduler
    if scheduler is not None:
        tickgate.replay.run.build_scheduler = lambda *a, **k: (scheduler, build(*a, **k)[1])
    try:
        start = time.perf_counter()
        code = cli(["replay", "--input", str(workload), "--policy", str(policy), "--output", str(output),
                    "--quiet"])
        seconds = time.perf_counter() - start
    finally:
        tickgate.replay.run.build_scheduler = build
    if code:
        raise SystemExit(f"tickgate replay exited {code}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", type=Path)
    ap.add_argument("--policy", type=Path, default=REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml")
    ap.add_argument("--pipeline", action="store_true",
                    help="also time the replay command with its helpers, with the scheduler and scheduling free")
    args = ap.parse_args()

    from tickgate.replay.engine import build_scheduler, run
    from tickgate.interfaces import Clock
    from tickgate.host.policy import load_policy
    from tickgate.simulate import replay
    from tickgate.replay.fingerprint import FingerprintSink
    from tickgate.replay.report import SummarySink
    from tickgate.workload.sources import open_requests

    policy = load_policy(args.policy)
    perf = time.perf_counter  # wall time of each part

    start = perf()
    stream, inputs = open_requests(args.workload, "workload", block_size=None, limit=None)
    requests = list(stream)
    read_s = perf() - start
    timed = bool(requests) and requests[0].arrival_ms is not None

    engine_clock = Clock()
    scheduler, _ = build_scheduler(policy, engine_clock, prefix_block_size=inputs.get("block_size"))
    records: list[Any] = []
    outcomes: list[list[Any]] = []
    step, pop = scheduler.step, scheduler.pop_outcomes

    def recording_step(horizon: Any) -> Any:
        record = step(horizon)
        records.append(record)
        return record

    def recording_pop() -> list[Any]:
        out = pop()
        outcomes.append(out)
        return out

    scheduler.step = recording_step  # type: ignore[method-assign]
    scheduler.pop_outcomes = recording_pop  # type: ignore[method-assign]
    start = perf()
    run(requests, scheduler, engine_clock, [], timed=timed, max_ticks=policy.max_ticks)
    schedule_s = perf() - start

    start = perf()
    run(requests, _Replayer(records, outcomes), Clock(), [], timed=timed)  # type: ignore[arg-type]
    floor_s = perf() - start

    fingerprint = FingerprintSink()
    start = perf()
    run(requests, _Replayer(records, outcomes), Clock(), [fingerprint, SummarySink()],  # type: ignore[arg-type]
        timed=timed)
    sinks_s = perf() - start - floor_s

    expected = replay(requests, policy, inputs=inputs)["summary"]["trace_fingerprint"]
    if fingerprint.hexdigest() != expected:
        print(f"fingerprints disagree: {fingerprint.hexdigest()} vs {expected}", file=sys.stderr)
        return 1
    pipeline: list[tuple[str, float]] = []
    if args.pipeline:
        import gc
        import tempfile

        gc.collect()
        gc.freeze()  # the kept records are a large heap: no collection should walk it
        with tempfile.TemporaryDirectory() as tmp:
            real, free = Path(tmp) / "real.json", Path(tmp) / "free.json"
            real_s = _replay_command(args.workload, args.policy, real, None)
            free_s = _replay_command(args.workload, args.policy, free,
                                     _Replaying(records, outcomes, scheduler))
            if real.read_bytes() != free.read_bytes():
                print("the replay command's reports disagree with scheduling free", file=sys.stderr)
                return 1
        pipeline = [("replay command (helpers as a user gets them)", real_s),
                    ("  its floor: scheduling free", free_s)]
    n_req, n_rec = len(requests), len(records)
    steps = engine_clock.tick
    print(f"{args.workload.name}: {n_req:,} requests, {n_rec:,} records, {steps:,} steps, "
          f"fingerprint {expected}, load average {os.getloadavg()[0]:.2f}")
    rows = [("read", read_s), ("schedule (scheduler + engine loop)", schedule_s),
            ("  scheduler alone", schedule_s - floor_s), ("  engine loop floor", floor_s),
            ("sinks (fingerprint + summary)", sinks_s), *pipeline]
    print(f"{'part':46s} {'s':>8s} {'us/record':>10s} {'us/request':>11s}")
    for name, seconds in rows:
        print(f"{name:46s} {seconds:8.2f} {seconds / max(n_rec, 1) * 1e6:10.1f} "
              f"{seconds / max(n_req, 1) * 1e6:11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
