"""Fleet scale benchmark (issue 21): 4 replicas at 4x the arrival rate against one at 1x.

    python benchmarks/bench_fleet.py                  # 100k requests
    python benchmarks/bench_fleet.py --n 20000        # quicker
    python benchmarks/bench_fleet.py --routers round-robin,least-loaded,prefix-aware

The trace is the scale benchmark's (``gen_mooncake.py --seed 1``: Poisson 3 req/s, inputs
64-2048, outputs 16-512, no shared prefixes); ``--rate 12`` draws the same requests with every
gap a quarter as long. Each replay is ``tickgate replay`` in a fresh process, as a user runs it,
under ``fixtures/policies/vllm-v1-toy.yaml``: once plain on the 3 req/s trace, then, per router, with
``cluster: {replicas: 4, router: ...}`` on the 12 req/s trace. Every replica of the fleet sees
about the traffic the single engine sees, so a fleet that costs what its events cost takes about
the single replay's time. Prints wall seconds, peak RSS (benchproc: the whole process tree) and
the ratio fleet / single, with the load average: it is a script, not a test (the machine is noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from benchproc import run_measured  # noqa: E402

POLICY = REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml"


def trace(workdir: Path, n: int, rate: float) -> Path:
    path = workdir / f"mooncake-{n}-seed1-rate{rate:g}.jsonl"
    if not path.exists():
        with open(path, "w") as out:
            subprocess.run([sys.executable, str(HERE / "gen_mooncake.py"), "--n", str(n), "--seed", "1",
                            "--rate", str(rate), "--out", "-"], stdout=out, check=True)
    return path


def replay(trace_path: Path, policy: Path, output: Path) -> dict:
    result = run_measured([sys.executable, "-m", "tickgate", "replay", "--input", str(trace_path),
                           "--input-format", "mooncake", "--block-size", "16", "--policy", str(policy),
                           "--output", str(output), "--quiet"])
    if result["code"] != 0:
        raise SystemExit(f"replay failed: {result['stderr'].strip()}")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--routers", default="round-robin,least-loaded")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tickgate-bench")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    slow, fast = trace(args.workdir, args.n, 3.0), trace(args.workdir, args.n, 12.0)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    single = replay(slow, POLICY, args.workdir / "single.json")
    report = json.loads((args.workdir / "single.json").read_text())
    print(f"1 replica, 3 req/s: {single['wall_s']:.2f} s, {single['peak_rss_mb']:.0f} MB, "
          f"{report['summary']['total_ticks']} steps, TTFT p50 {report['latency']['ttft_ms']['p50']} ms")
    base = POLICY.read_text()
    for router in args.routers.split(","):
        policy = args.workdir / f"fleet-{router}.yaml"
        policy.write_text(base + f"cluster:\n  replicas: 4\n  router: {{name: {router}}}\n")
        fleet = replay(fast, policy, args.workdir / f"fleet-{router}.json")
        report = json.loads((args.workdir / f"fleet-{router}.json").read_text())
        print(f"4 replicas ({router}), 12 req/s: {fleet['wall_s']:.2f} s, {fleet['peak_rss_mb']:.0f} MB, "
              f"{report['summary']['total_ticks']} steps, TTFT p50 {report['latency']['ttft_ms']['p50']} ms; "
              f"ratio {fleet['wall_s'] / single['wall_s']:.3f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
