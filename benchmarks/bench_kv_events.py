"""What KV events cost the vllm-v1 replay: nothing unless asked (issue 21, docs/vllm.md "KV events").

    python benchmarks/bench_kv_events.py [--base main] [--limit 3000] [--rounds 5]

Three variants of the same replay (the Mooncake conversation trace, ``fixtures/policies/vllm-v1-toy.yaml``),
each in a fresh process, interleaved round by round, timing ``replay()`` alone (imports and reading
the policy excluded; the requests are read into a list first):

* ``base``: the ``tickgate_vllm`` adapter as it was at ``--base`` (``git archive`` into a temporary
  directory put first on ``PYTHONPATH``; the core is this tree's, whose additions it never calls);
* ``off``: this tree, events not asked for (the plain pool and methods: the claim is base == off);
* ``on``: this tree with ``kv_events_path`` (recording pool, no decode group, the msgpack file).

Prints each run, the medians, the ratios off/base and on/off, and checks that all three give the
same fingerprint. A script, not a test: timings depend on the machine and its load.

    python benchmarks/bench_kv_events.py --instructions [--limit 200]

counts instructions instead (valgrind cachegrind, as ``bench_instructions.py``; wall time on a
shared VM varies by up to 2x): each variant replays ``--limit`` and 10 requests, the difference is
the replay of the rest, start-up and imports cancelled. ``PYTHONHASHSEED=0`` for every process.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROGRAM = r"""
import json, sys, tempfile, time
from pathlib import Path
import tickgate_vllm
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests
trace, policy, limit, events = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "on"
requests, inputs = open_requests(Path(trace), "mooncake", block_size=None, limit=limit)
requests = list(requests)
pol = load_policy(Path(policy))
with tempfile.TemporaryDirectory() as tmp:
    t0 = time.perf_counter()
    report = replay(requests, pol, inputs=inputs, kv_events_path=Path(tmp) / "e.msgpack" if events else None)
    wall = time.perf_counter() - t0
    size = (Path(tmp) / "e.msgpack").stat().st_size if events else 0
print(json.dumps({"wall_s": wall, "fingerprint": report["summary"]["trace_fingerprint"],
                  "adapter": tickgate_vllm.__file__, "bytes": size,
                  "batches": report.get("kv_events", {}).get("batches", 0)}))
"""

# the base adapter cannot be given kv_events_path (its scheduler has no capability): run it plain
PROGRAM_BASE = PROGRAM.replace("kv_events_path=Path(tmp) / \"e.msgpack\" if events else None", "")


def extract_base(commit: str, into: Path) -> Path:
    blob = subprocess.run(["git", "-C", str(REPO), "archive", commit, "adapters/vllm/src/tickgate_vllm"],
                          check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into / "adapters/vllm/src"


def run(variant: str, args: argparse.Namespace, base_path: Path, limit: int | None = None,
        valgrind: Path | None = None) -> dict:
    env = dict(os.environ)
    program = PROGRAM
    if variant == "base":
        env["PYTHONPATH"] = str(base_path) + os.pathsep + env.get("PYTHONPATH", "")
        program = PROGRAM_BASE
    argv = [sys.executable, "-c", program, str(args.trace), str(args.policy), str(limit or args.limit),
            "on" if variant == "on" else "off"]
    if valgrind is not None:
        env["PYTHONHASHSEED"] = "0"
        env["TICKGATE_PARALLEL"] = "0"
        argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={valgrind}", *argv]
    out = subprocess.run(argv, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if valgrind is not None:
        match = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
        if match is None:
            raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
        result["instructions"] = int(match.group(1).replace(",", ""))
    expected = str(base_path) if variant == "base" else str(REPO / "adapters/vllm/src")
    if not result["adapter"].startswith(expected):
        raise SystemExit(f"{variant} imported {result['adapter']}, not the adapter under {expected}")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="main", help="commit whose vllm adapter is the baseline")
    ap.add_argument("--trace", type=Path,
                    default=REPO / "fixtures/realdata/traces/mooncake_conversation_trace.jsonl")
    ap.add_argument("--policy", type=Path, default=REPO / "fixtures/policies/vllm-v1-toy.yaml")
    ap.add_argument("--limit", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--instructions", action="store_true", help="count instructions (valgrind), not time")
    args = ap.parse_args(argv)
    if args.instructions:
        return count_instructions(args)
    walls: dict[str, list[float]] = {"base": [], "off": [], "on": []}
    prints = set()
    with tempfile.TemporaryDirectory() as tmp:
        base_path = extract_base(args.base, Path(tmp))
        for n in range(args.rounds):
            for variant in walls:
                r = run(variant, args, base_path)
                walls[variant].append(r["wall_s"])
                prints.add(r["fingerprint"])
                extra = f"  {r['batches']} batches, {r['bytes'] / 1e6:.1f} MB" if variant == "on" else ""
                print(f"round {n + 1} {variant:>4}: {r['wall_s']:7.3f} s{extra}", flush=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    print(f"median base {med['base']:.3f} s, off {med['off']:.3f} s, on {med['on']:.3f} s; "
          f"off/base {med['off'] / med['base']:.3f}, on/off {med['on'] / med['off']:.3f}; "
          f"load average {os.getloadavg()[0]:.2f}")
    if len(prints) != 1:
        print(f"fingerprints differ: {sorted(prints)}", file=sys.stderr)
        return 1
    return 0


def count_instructions(args: argparse.Namespace) -> int:
    counts: dict[str, int] = {}
    prints = set()
    with tempfile.TemporaryDirectory() as tmp:
        base_path = extract_base(args.base, Path(tmp))
        for variant in ("base", "off", "on"):
            small = run(variant, args, base_path, 10, Path(tmp) / "small.out")["instructions"]
            big = run(variant, args, base_path, args.limit, Path(tmp) / "big.out")
            prints.add(big["fingerprint"])
            counts[variant] = big["instructions"] - small
            print(f"{variant:>4}: {counts[variant] / 1e9:.4f} G instructions for requests 11..{args.limit}",
                  flush=True)
    print(f"off/base {counts['off'] / counts['base']:.4f}, on/off {counts['on'] / counts['off']:.3f}")
    if len(prints) != 1:
        print(f"fingerprints differ: {sorted(prints)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
