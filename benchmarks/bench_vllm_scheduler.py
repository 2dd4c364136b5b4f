#!/usr/bin/env python3
"""Benchmark the ``vllm-v1`` scheduler on a seeded Mooncake-style synthetic trace.

Requests: Poisson arrivals (``--rate`` req/s, in ms), input uniform in
[64, 2048] tokens, output uniform in [16, 512], unique prefix-block ids at
block size 16 (every block hashed, none shared), generated lazily so memory
is the scheduler's. Replays in-process through ``tickgate.replay`` with the
``fixtures/policies/vllm-v1-toy.yaml`` preset (or ``--policy``) and prints wall time,
peak RSS, engine steps/s and requests/s. ``--max-span 1`` disables
fast-forwarding for a same-script baseline (the fingerprints must match).

    python benchmarks/bench_vllm_scheduler.py -n 100000
    python benchmarks/bench_vllm_scheduler.py -n 10000 --compare-no-span
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

from tickgate.interfaces.model import Request

REPO = Path(__file__).resolve().parents[1]


def synthetic(n: int, seed: int, rate: float, block_size: int = 16) -> Iterator[Request]:
    rng = random.Random(seed)
    t = 0.0
    next_block = 0
    for i in range(n):
        t += rng.expovariate(rate) * 1000.0
        prompt = rng.randint(64, 2048)
        blocks = -(-prompt // block_size)
        yield Request(id=f"m{i:07d}", prompt_tokens=prompt, max_output_tokens=rng.randint(16, 512),
                      arrival_ms=round(t, 3), prefix_blocks=tuple(range(next_block, next_block + blocks)))
        next_block += blocks


def run(n: int, seed: int, rate: float, policy_path: Path, max_span: int | None) -> dict:
    from tickgate.host.policy import load_policy
    from tickgate.simulate import replay

    path = policy_path
    if max_span is not None:
        from tickgate.util.locations import load_yaml

        doc, _ = load_yaml(policy_path)
        doc["scheduler"]["options"]["max_span"] = max_span
        path = Path(tempfile.mkdtemp()) / "p.yaml"
        path.write_text(json.dumps(doc))
    policy = load_policy(path)
    t0 = time.perf_counter()
    report = replay(synthetic(n, seed, rate), policy, detail_limit=0)
    wall = time.perf_counter() - t0
    s = report["summary"]
    sched = report["scheduler"]
    return {
        "requests": n, "max_span": max_span, "wall_s": round(wall, 3),
        "steps": s["total_ticks"], "busy_steps": report["utilization"]["busy_ticks"],
        "steps_per_s": round(report["utilization"]["busy_ticks"] / wall), "requests_per_s": round(n / wall),
        "completed": s["completed_requests"], "preemptions": sched["preemptions"],
        "fingerprint": s["trace_fingerprint"],
        "ttft_p99_ms": report["latency"]["ttft_ms"]["p99"] if report["latency"]["ttft_ms"] else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=3.0, help="arrivals per second")
    ap.add_argument("--policy", type=Path, default=REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml")
    ap.add_argument("--max-span", type=int, default=None)
    ap.add_argument("--compare-no-span", action="store_true",
                    help="also run with max_span 1 and check the fingerprint is unchanged")
    a = ap.parse_args()
    t0 = time.perf_counter()
    result = run(a.n, a.seed, a.rate, a.policy, a.max_span)
    result["process_s"] = round(time.perf_counter() - t0, 3)
    print(json.dumps(result))
    if a.compare_no_span:
        base = run(a.n, a.seed, a.rate, a.policy, 1)
        print(json.dumps(base))
        print(f"speed-up {base['wall_s'] / result['wall_s']:.2f}x; fingerprints "
              f"{'match' if base['fingerprint'] == result['fingerprint'] else 'DIFFER'}")
        return 0 if base["fingerprint"] == result["fingerprint"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
