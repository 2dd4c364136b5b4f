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


def instructions(argv: list[str], workdir: Path) -> int:
    out = workdir / "cachegrind.out"
    env = {**os.environ, "TICKGATE_PARALLEL": "0"}
    proc = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                           sys.executable, "-m", "tickgate", *argv], capture_output=True, text=True, env=env)
    match = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if proc.returncode != 0 or match is None:
        raise SystemExit(f"{' '.join(argv)} failed under valgrind:\n{proc.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000, help="synthetic Mooncake-style requests")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", type=Path, default=REPO / "policies" / "vllm-v1-bench.yaml")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        counts = {}
        for n in (BASE, args.size):  # the small run is start-up (interpreter, imports, plugins)
            trace, workload = work / f"trace{n}.jsonl", work / f"w{n}.json"
            subprocess.run([sys.executable, str(HERE / "gen_mooncake.py"), "--n", str(n), "--seed",
                            str(args.seed), "--out", str(trace)], check=True)
            counts[("import", n)] = instructions(["import", "mooncake", str(trace), "--block-size", "16",
                                                  "--output", str(workload), "--quiet"], work)
            counts[("replay", n)] = instructions(["replay", "--input", str(workload), "--policy", str(args.policy),
                                                  "--output", str(work / "r.json"), "--quiet"], work)
    for phase in ("import", "replay"):
        start, total = counts[(phase, BASE)], counts[(phase, args.size)]
        print(f"{phase}: {(total - start) / 1e9:.3f} G instructions for {args.size - BASE} more requests "
              f"({(total - start) / (args.size - BASE) / 1e3:.0f} k per request); start-up and {BASE} "
              f"requests {start / 1e9:.3f} G")
    return 0


if __name__ == "__main__":
    sys.exit(main())
