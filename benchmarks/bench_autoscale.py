"""Autoscaling cost benchmark (issue 35): an autoscaled replay against a static one of its peak size.

    python benchmarks/bench_autoscale.py                    # the slo and hpa presets, 2 rounds
    python benchmarks/bench_autoscale.py --presets slo --rounds 3

The workload is the shipped day (``fixtures/workloads/diurnal-day.json``). For each preset
(``policies/fleet-autoscale-<name>.yaml``) the autoscaled replay runs first; the static replay is
the same policy without ``cluster.autoscaler`` / ``lifecycle`` and with ``cluster.replicas`` = the
autoscaled run's peak, so both have the same largest fleet and see the same requests. The two run
in alternation, each ``tickgate replay`` in a fresh process as a user runs it; printed: wall and CPU
seconds (medians over the rounds), peak RSS, and the ratios autoscaled / static, with the load
average (a script, not a test: the machine is noisy). Target: ratio <= 1.3.
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
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from benchproc import run_measured  # noqa: E402

WORKLOAD = REPO / "fixtures" / "workloads" / "diurnal-day.json"


def replay(policy: Path, output: Path) -> dict:
    result = run_measured([sys.executable, "-m", "tickgate", "replay", "--input", str(WORKLOAD),
                           "--policy", str(policy), "--output", str(output), "--quiet"])
    if result["code"] != 0:
        raise SystemExit(f"replay failed: {result['stderr'].strip()}")
    return result


def static_policy(preset: Path, replicas: int, out: Path) -> Path:
    from tickgate.util.locations import load_yaml

    doc, _ = load_yaml(preset)
    doc = json.loads(json.dumps(doc))
    cluster = doc["cluster"]
    cluster.pop("autoscaler")
    cluster.pop("lifecycle", None)
    cluster["replicas"] = replicas
    out.write_text(json.dumps(doc, indent=1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="slo,hpa")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tickgate-bench")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for name in args.presets.split(","):
        preset = REPO / "policies" / f"fleet-autoscale-{name}.yaml"
        scaled_out = args.workdir / f"autoscale-{name}.json"
        runs: dict[str, list[dict]] = {"autoscaled": [], "static": []}
        runs["autoscaled"].append(replay(preset, scaled_out))
        peak = max(json.loads(scaled_out.read_text())["autoscaling"]["peak_replicas"].values())
        static = static_policy(preset, peak, args.workdir / f"static-{name}.json")
        runs["static"].append(replay(static, args.workdir / f"static-{name}.report.json"))
        for _ in range(args.rounds - 1):
            runs["autoscaled"].append(replay(preset, scaled_out))
            runs["static"].append(replay(static, args.workdir / f"static-{name}.report.json"))
        figures = {
            kind: {key: statistics.median(r[key] for r in rs) for key in ("wall_s", "cpu_s", "peak_rss_mb")}
            for kind, rs in runs.items()
        }
        a, s = figures["autoscaled"], figures["static"]
        print(f"{name}: autoscaled (peak {peak} replicas) wall {a['wall_s']:.2f} s, CPU {a['cpu_s']:.2f} s, "
              f"{a['peak_rss_mb']:.0f} MB; static {peak} replicas wall {s['wall_s']:.2f} s, CPU {s['cpu_s']:.2f} s, "
              f"{s['peak_rss_mb']:.0f} MB; ratio wall {a['wall_s'] / s['wall_s']:.2f}x, "
              f"CPU {a['cpu_s'] / s['cpu_s']:.2f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
