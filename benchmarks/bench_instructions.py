"""Count the instructions of an import and a replay (valgrind cachegrind).

    python benchmarks/bench_instructions.py                    # 10k synthetic requests
    python benchmarks/bench_instructions.py --size 2000 --policy policies/default.yaml

Wall-clock time on a shared VM varies by up to 2x from hour to hour, which hides
the 5-15 % changes most speed work is made of. Instruction counts do not vary:
this runs each phase once under ``valgrind --tool=cachegrind --cache-sim=no``
(about 50x slower than native, so keep the size small), in one process
(``TICKGATE_PARALLEL=0``), and subtracts the count of the same phase on 10
requests as start-up. Compare two trees by running it in
each (with their bytecode compiled: ``python -m compileall``, or start-up
includes compiling). It needs valgrind (``apt-get install valgrind``).
Hash seeds are fixed (``PYTHONHASHSEED=0``): dict layouts move counts by ~1 %.

    python benchmarks/bench_instructions.py --scheduler        # + the scheduler alone
    python benchmarks/bench_instructions.py --helpers          # + the replay with helper processes

``--scheduler`` also counts the scheduler on its own: the workload read into a
list, then the engine loop with the policy's scheduler and no sinks, minus the
same process stopping after the read. ``--helpers`` also counts the replay with
its helper processes forced on (``TICKGATE_PARALLEL=1``), one count per process:
the replaying process is what a large replay waits on.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
#: requests in the run whose count stands for start-up
BASE = 10


def instructions(argv: list[str], workdir: Path, *, module: bool = True) -> int:
    """Instructions of one process: ``python -m tickgate ARGV`` (or ``python ARGV``)."""
    out = workdir / "cachegrind.out"
    env = {**os.environ, "TICKGATE_PARALLEL": "0", "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-m", "tickgate", *argv] if module else [sys.executable, *argv]
    proc = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                           *command], capture_output=True, text=True, env=env)
    match = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or match is None:
        raise SystemExit(f"{' '.join(argv)} failed under valgrind:\n{proc.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))


def per_process(argv: list[str], workdir: Path) -> list[tuple[str, int]]:
    """Instructions of ``python -m tickgate ARGV`` with helper processes forced
    on, per process: the replaying process first. A forked helper's count
    starts from its parent's at the fork."""
    outs = workdir / "per-process"
    outs.mkdir()
    env = {**os.environ, "TICKGATE_PARALLEL": "1", "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                             f"--cachegrind-out-file={outs}/%p", sys.executable, "-m", "tickgate", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed under valgrind:\n{err[-2000:]}")
    counts = []
    for path in sorted(outs.iterdir(), key=lambda p: (p.name != str(proc.pid), int(p.name))):
        total = next(line for line in path.read_text().splitlines() if line.startswith("summary:"))
        counts.append(("replaying process" if path.name == str(proc.pid) else f"helper {path.name}",
                       int(total.split()[1])))
    return counts


def _schedule_only(workload: str, policy_path: str, phase: str) -> None:
    """Run under valgrind: read ``workload`` into a list, then (``phase ==
    "schedule"``) run the engine loop with the policy's scheduler and no sinks."""
    from tickgate.replay.engine import build_scheduler, run
    from tickgate.interfaces import Clock
    from tickgate.host.policy import load_policy
    from tickgate.workload.sources import open_requests

    policy = load_policy(Path(policy_path))
    stream, inputs = open_requests(Path(workload), "workload", block_size=None, limit=None)
    requests = list(stream)
    if phase == "schedule":
        clock = Clock()
        scheduler, _ = build_scheduler(policy, clock, prefix_block_size=inputs.get("block_size"))
        run(requests, scheduler, clock, [], timed=bool(requests) and requests[0].arrival_ms is not None,
            max_ticks=policy.max_ticks)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000, help="synthetic Mooncake-style requests")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", type=Path, default=REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml")
    ap.add_argument("--scheduler", action="store_true", help="also count the scheduler alone")
    ap.add_argument("--helpers", action="store_true", help="also count a replay with helpers, per process")
    ap.add_argument("--run-phase", nargs=3, metavar=("PHASE", "WORKLOAD", "POLICY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run_phase:  # the process --scheduler counts
        phase, workload, policy = args.run_phase
        _schedule_only(workload, policy, phase)
        return 0
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        counts = {}
        extra: list[str] = []
        for n in (BASE, args.size):  # the small run is start-up (interpreter, imports, plugins)
            trace, workload = work / f"trace{n}.jsonl", work / f"w{n}.json"
            subprocess.run([sys.executable, str(HERE / "gen_mooncake.py"), "--n", str(n), "--seed",
                            str(args.seed), "--out", str(trace)], check=True)
            counts[("import", n)] = instructions(["import", "mooncake", str(trace), "--block-size", "16",
                                                  "--output", str(workload), "--quiet"], work)
            counts[("replay", n)] = instructions(["replay", "--input", str(workload), "--policy", str(args.policy),
                                                  "--output", str(work / "r.json"), "--quiet"], work)
        workload = work / f"w{args.size}.json"
        if args.scheduler:
            read, scheduled = (instructions([__file__, "--run-phase", phase, str(workload), str(args.policy)],
                                            work, module=False) for phase in ("read", "schedule"))
            extra.append(f"scheduler alone: {(scheduled - read) / 1e9:.3f} G instructions for {args.size} requests "
                         f"(engine loop included, no sinks; the read, {read / 1e9:.3f} G, subtracted)")
        if args.helpers:
            for name, count in per_process(["replay", "--input", str(workload), "--policy", str(args.policy),
                                            "--output", str(work / "rh.json"), "--quiet"], work):
                extra.append(f"replay with helpers, {name}: {count / 1e9:.3f} G instructions (start-up included)")
    for phase in ("import", "replay"):
        start, total = counts[(phase, BASE)], counts[(phase, args.size)]
        print(f"{phase}: {(total - start) / 1e9:.3f} G instructions for {args.size - BASE} more requests "
              f"({(total - start) / (args.size - BASE) / 1e3:.0f} k per request); start-up and {BASE} "
              f"requests {start / 1e9:.3f} G")
    for line in extra:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
