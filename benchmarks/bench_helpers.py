"""What each forked helper process saves, measured command by command in one run.

    python benchmarks/bench_helpers.py                       # 100k requests / 200k pairs, 3 rounds
    python benchmarks/bench_helpers.py --requests 20000 --pairs 50000 --rounds 1

docs/DEVELOPING.md, "Helper processes": a helper stays only while it saves more
than 10 % of its command's wall time. This script runs every command as a user
does (a fresh process each), with each helper off and on, the settings of one
command interleaved round by round so that a change of the machine's load hits
them alike, and prints per setting the median wall time, the CPU time (the
process and its children) and the peak RSS of the process tree
(``benchproc.py``), and the saving against the setting without helpers:

* ``tickgate import mooncake`` (the 100k-row trace of ``bench_replay.py``):
  ``TICKGATE_PARALLEL=0`` against the default (``import_parts``);
* ``tickgate replay`` of that workload with ``fixtures/policies/vllm-v1-toy.yaml``:
  ``TICKGATE_PARALLEL=0`` against ``=1`` (``prefetch`` and ``sidecar``, as the
  command runs them on a large file); both reports must be byte-identical, or
  the script fails;
* ``tickgate gate`` of two neutral files (``bench_gate.py``'s writer):
  ``TICKGATE_PARALLEL=0`` against the default (``gate_sides``).

Child processes run with PYTHONHASHSEED=0; the load average is printed before
and after. A script, not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from bench_gate import write_side
from bench_replay import DEFAULT_POLICY, mooncake_trace
from benchproc import run_measured

def _tickgate() -> str:
    return str(Path(sys.executable).with_name("tickgate"))


def _measure(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = run_measured(argv, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res["code"] != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {res['stderr'][-2000:]}")
    res["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return res


def _rounds(settings: dict[str, tuple[list[str], dict[str, str], Path | None]], rounds: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in settings}
    digests: set[str] = set()
    for _ in range(rounds):
        for name, (argv, env, output) in settings.items():
            runs[name].append(_measure(argv, env))
            if output is not None:
                digests.add(hashlib.sha256(output.read_bytes()).hexdigest())
    if len(digests) > 1:
        raise SystemExit(f"outputs differ between settings: {sorted(digests)}")
    return runs


def _print(title: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    print(f"\n{title}")
    base = statistics.median(r["wall_s"] for r in next(iter(runs.values())))
    for name, rs in runs.items():
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        rss = max(r["peak_rss_mb"] for r in rs)
        walls = ", ".join(f"{r['wall_s']:.2f}" for r in rs)
        print(f"  {name:<22} wall {wall:6.2f} s ({walls})  cpu {cpu:6.2f} s  peak {rss:6.0f} MB  "
              f"saves {100 * (1 - wall / base):5.1f} %")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1, help="of the synthetic trace (bench_replay.py)")
    ap.add_argument("--policy", type=Path, default=DEFAULT_POLICY)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/tickgate-bench-helpers"))
    args = ap.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("TICKGATE_PARALLEL", None)
    off = {**env, "TICKGATE_PARALLEL": "0"}
    tg = _tickgate()
    print(f"load average before: {os.getloadavg()}")

    trace = mooncake_trace(work, args.requests, args.seed)
    workload = work / "w.json"
    imp = [tg, "import", "mooncake", str(trace), "--block-size", "16", "--output", str(workload)]
    _print(f"import mooncake, {args.requests} rows", _rounds({
        "no helper": (imp, off, workload), "import_parts": (imp, env, workload)}, args.rounds))

    report = work / "r.json"
    rep = [tg, "replay", "--input", str(workload), "--policy", str(args.policy), "--output", str(report), "--quiet"]
    _print(f"replay, {args.requests} requests, {args.policy.name}", _rounds({
        "no helper": (rep, off, report), "prefetch + sidecar": (rep, {**env, "TICKGATE_PARALLEL": "1"}, report)},
        args.rounds))

    base, cand = work / f"b{args.pairs}.json", work / f"c{args.pairs}.json"
    if not base.exists():
        write_side(base, args.pairs, 1, 0.0)
        write_side(cand, args.pairs, 2, 1.0)
    out = work / "g.json"
    gate = [tg, "gate", "--baseline", str(base), "--candidate", str(cand), "--output", str(out)]
    _print(f"gate, {args.pairs} pairs", _rounds({"no helper": (gate, off, out), "gate_sides": (gate, env, out)},
                                              args.rounds))
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
