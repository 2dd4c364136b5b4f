"""The same replay under two tickgate installs, interleaved: this tree against an earlier commit.

    git worktree add /tmp/old <commit> && python3.11 -m venv /tmp/old/.venv \\
        && /tmp/old/.venv/bin/pip install /tmp/old/core /tmp/old/adapters/vllm
    python benchmarks/bench_two_installs.py --old /tmp/old/.venv/bin/tickgate --workload W.json

Each round runs ``tickgate replay --input W --policy P`` with the old install, then with this one
(the ``tickgate`` beside this interpreter), in fresh processes with the machine's defaults (helper
processes on); it prints wall time and peak RSS per run, the medians, their ratio and the load
average, and checks that both reports carry the same fingerprint. A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from benchproc import run_measured  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the earlier install's tickgate executable")
    ap.add_argument("--workload", required=True, type=Path)
    ap.add_argument("--policy", type=Path, default=HERE.parent / "fixtures" / "policies" / "vllm-v1-toy.yaml")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    new = str(Path(sys.executable).with_name("tickgate"))
    walls: dict[str, list[float]] = {"old": [], "new": []}
    prints: dict[str, set[str]] = {"old": set(), "new": set()}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            for label, exe in (("old", args.old), ("new", new)):
                out = Path(tmp) / f"{label}.json"
                r = run_measured([exe, "replay", "--input", str(args.workload), "--policy", str(args.policy),
                                  "--output", str(out)], env=dict(os.environ))
                if r["code"] != 0:
                    print(r["stderr"], file=sys.stderr)
                    return 1
                walls[label].append(r["wall_s"])
                prints[label].add(json.loads(out.read_text())["summary"]["trace_fingerprint"])
                print(f"round {n + 1} {label}: {r['wall_s']:7.2f} s  peak {r['peak_rss_mb']:6.0f} MB  "
                      f"load {os.getloadavg()[0]:.2f}")
    old, new_s = statistics.median(walls["old"]), statistics.median(walls["new"])
    print(f"median: old {old:.2f} s, new {new_s:.2f} s, ratio {new_s / old:.3f}; "
          f"fingerprints {'equal' if prints['old'] == prints['new'] else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
