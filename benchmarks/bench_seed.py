#!/usr/bin/env python3
"""Seed scheduler under the default policy: 10k and 100k requests, whole process.

Generates a seeded workload sized for policies/default.yaml (20 pages of 16 tokens,
prefill budget 128, decode width 2): prompts 8-120 tokens, outputs 1-16 tokens,
Poisson arrivals at 0.18 requests per tick (a loaded but stable queue). Each size
is replayed by `python -m tickgate replay` in its own process; wall time and peak
RSS are measured for that process alone (os.wait4).

    python benchmarks/bench_seed.py [--sizes 10000,100000] [--seed 7] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def generate(path: Path, n: int, seed: int, rate: float = 0.18) -> None:
    from tickgate.interfaces.model import Request
    from tickgate.workload.format import WorkloadHeader, write_workload

    rng = random.Random(seed)

    def requests():
        t = 0.0
        for i in range(n):
            t += rng.expovariate(rate)
            yield Request(id=f"r{i:07d}", prompt_tokens=rng.randint(8, 120),
                          max_output_tokens=rng.randint(1, 16), priority=rng.choice((0, 0, 0, 1)),
                          arrival_tick=int(t))

    with path.open("w") as fh:
        write_workload(fh, WorkloadHeader(description=f"bench_seed n={n} seed={seed}"), requests())


def timed_replay(workload: Path, report: Path) -> tuple[float, float]:
    start = time.perf_counter()  # benchmark timing only; never part of any output tickgate writes
    proc = subprocess.Popen([sys.executable, "-m", "tickgate", "replay", "--input", str(workload),
                             "--output", str(report), "--quiet",
                             "--policy", str(REPO / "policies" / "default.yaml")])
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"replay failed for {workload}")
    return wall, usage.ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", type=Path, default=None, help="keep workloads and reports here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = args.keep or Path(tempfile.mkdtemp(prefix="tickgate-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in sizes:
        workload = tmp / f"seed-{n}.json"
        generate(workload, n, args.seed)
        report_path = tmp / f"seed-{n}.report.json"
        wall, rss = timed_replay(workload, report_path)
        summary = json.loads(report_path.read_text())["summary"]
        ticks = summary["total_ticks"]
        rows.append((n, wall, rss, ticks))
        print(f"n={n:>8}  wall {wall:7.2f} s  peak RSS {rss:7.1f} MB  {n / wall:9.0f} req/s  "
              f"{ticks / wall:9.0f} ticks/s  ticks {ticks}  completed {summary['completed_requests']}  "
              f"fingerprint {summary['trace_fingerprint']}")
    if len(rows) > 1:
        (n0, w0, _, _), (n1, w1, _, _) = rows[0], rows[-1]
        print(f"time ratio {n0}->{n1}: {w1 / w0:.2f} for {n1 / n0:.0f}x the requests")


if __name__ == "__main__":
    main()
