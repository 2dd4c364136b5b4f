#!/usr/bin/env python3
"""Benchmark the ``sglang`` scheduler on a seeded Mooncake-style synthetic trace.

Requests: Poisson arrivals (``--rate`` req/s, in ms), input uniform in
[64, 2048] tokens, output uniform in [16, 512], prefix-block ids at block size
16 where a quarter of the requests share one of 8 system prompts (so the radix
cache has hits and evictions), generated lazily. Replays in-process through
``tickgate.replay`` with ``policies/sglang-default.yaml`` (or ``--policy``) and
prints wall and CPU time (the CPU time is the figure to compare on a shared machine), peak RSS, steps/s and requests/s, and the report fingerprint.
Run it on two checkouts for a before/after ratio (docs/sglang.md lists one).

    python benchmarks/bench_sglang_scheduler.py -n 3000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import time
from pathlib import Path
from typing import Iterator

from tickgate.interfaces.model import Request

REPO = Path(__file__).resolve().parents[1]


def synthetic(n: int, seed: int, rate: float, block_size: int = 16) -> Iterator[Request]:
    rng = random.Random(seed)
    systems = [tuple(range(10_000_000 * (k + 1), 10_000_000 * (k + 1) + rng.randint(8, 64))) for k in range(8)]
    t = 0.0
    next_block = 0
    for i in range(n):
        t += rng.expovariate(rate) * 1000.0
        prompt = rng.randint(64, 2048)
        blocks = -(-prompt // block_size)
        head = systems[rng.randrange(8)] if rng.random() < 0.25 else ()
        head = head[:blocks]
        own = tuple(range(next_block, next_block + blocks - len(head)))
        next_block += len(own)
        yield Request(id=f"m{i:07d}", prompt_tokens=prompt, max_output_tokens=rng.randint(16, 512),
                      arrival_ms=round(t, 3), prefix_blocks=head + own)


def run(n: int, seed: int, rate: float, policy_path: Path) -> dict:
    from tickgate.host.policy import load_policy
    from tickgate.simulate import replay

    policy = load_policy(policy_path)
    t0, c0 = time.perf_counter(), time.process_time()
    report = replay(synthetic(n, seed, rate), policy, detail_limit=0)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = report["summary"]
    return {
        "requests": n, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "steps": s["total_ticks"],
        "busy_steps": report["utilization"]["busy_ticks"],
        "steps_per_s": round(report["utilization"]["busy_ticks"] / wall), "requests_per_s": round(n / wall),
        "completed": s["completed_requests"], "fingerprint": s["trace_fingerprint"],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=4.0, help="arrivals per second")
    ap.add_argument("--policy", type=Path, default=REPO / "policies" / "sglang-default.yaml")
    a = ap.parse_args()
    print(json.dumps(run(a.n, a.seed, a.rate, a.policy)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
