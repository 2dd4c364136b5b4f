"""What a roofline-timed replay costs against a linear-timed one (issue 20's target: <= 1.25x).

    python benchmarks/bench_timing.py                  # 100k requests, 3 rounds
    python benchmarks/bench_timing.py --size 10000 --rounds 5

Both replays run the same workload (the seeded synthetic Mooncake trace of
``bench_replay.py``, imported once) under ``fixtures/policies/vllm-v1-toy.yaml``: once
as it is (the ``linear`` model), once with its timing section replaced by
``roofline`` (llama-3.1-8b on H100-SXM-80GB). Each replay is a fresh
``tickgate replay`` process; the two settings alternate round by round so load
drifts hit both, and the script prints the median wall times, their ratio and
the machine's load average. A script, not a test: the figures depend on the
machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_replay import mooncake_trace  # noqa: E402
from benchproc import run_measured  # noqa: E402

ROOFLINE = """timing:
  name: roofline
  options: {model: llama-3.1-8b, gpu: H100-SXM-80GB, dtype: bf16, engine: vllm}
"""


def roofline_policy(base: Path, out: Path) -> Path:
    """The base policy with its timing section swapped for the roofline model."""
    text = base.read_text(encoding="utf-8")
    head = text[: text.index("\ntiming:") + 1]
    out.write_text(head + ROOFLINE, encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tickgate-bench")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    tickgate = str(Path(sys.executable).with_name("tickgate"))
    trace = mooncake_trace(args.workdir, args.size, 1)
    workload = args.workdir / f"workload-{args.size}.json"
    if not workload.exists():
        subprocess.run([tickgate, "import", "mooncake", str(trace), "--block-size", "16", "--output",
                        str(workload)], check=True)
    linear = REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml"
    roofline = roofline_policy(linear, args.workdir / "vllm-v1-roofline.yaml")
    env = {**os.environ, "TICKGATE_PARALLEL": "0"}
    walls: dict[str, list[float]] = {"linear": [], "roofline": []}
    for n in range(args.rounds):
        for label, policy in (("linear", linear), ("roofline", roofline)):
            out = args.workdir / f"report-{label}.json"
            r = run_measured([tickgate, "replay", "--input", str(workload), "--policy", str(policy),
                              "--output", str(out)], env=env)
            if r["code"] != 0:
                print(r["stderr"], file=sys.stderr)
                return 1
            walls[label].append(r["wall_s"])
            print(f"round {n + 1} {label:8s} {r['wall_s']:7.2f} s  peak {r['peak_rss_mb']:6.0f} MB  "
                  f"load {os.getloadavg()[0]:.2f}")
    lin, roof = statistics.median(walls["linear"]), statistics.median(walls["roofline"])
    print(f"median: linear {lin:.2f} s, roofline {roof:.2f} s, ratio {roof / lin:.3f} "
          f"({args.size} requests, {args.rounds} rounds, helpers off)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
