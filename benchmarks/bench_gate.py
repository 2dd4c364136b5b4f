"""Gate a million matched request pairs and report time and peak memory.

    python benchmarks/bench_gate.py [--pairs 1000000] [--workdir /tmp/tickgate-bench-gate] [--breakdown]

Writes a baseline and a candidate neutral observations file (seeded, written
once and reused), then runs ``tickgate gate --baseline --candidate`` with the
default policy in a fresh process and reports its wall time and peak RSS
(summed over the gate process and its reader child, sampled every 50 ms,
and ``ru_maxrss`` of the largest single process: ``benchproc.py``), plus the
same for a 100k-pair run in the same script as the scaling baseline: linear
cost means ~10x between them.

``--breakdown`` then gates the big pair once more inside this process, one
stage after the other (both sides read here, without the reader child), and
prints the seconds of each stage and signal: on a shared machine wall times
of whole runs vary widely, the split between stages much less.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from benchproc import run_measured

REPO = Path(__file__).resolve().parents[1]
MODELS = ("llama-3.1-8b", "qwen2.5-7b")
ACCELERATORS = ("h100", "a100")


def write_side(path: Path, pairs: int, seed: int, factor: float) -> None:
    """Paired traffic: the candidate's latencies are the baseline's times noise."""
    base = random.Random(7)
    noise = random.Random(seed)
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"version":1,"kind":"tickgate.observations","run":{"label":"%s","backend":"vllm",'
                 '"scheduler":"vllm-v1","provenance":{"format":"neutral"}},"requests":[\n' % path.stem)
        for i in range(pairs):
            lat = base.lognormvariate(7.0, 0.5)
            ttft = base.lognormvariate(4.0, 0.35)
            itl = base.lognormvariate(2.6, 0.2)
            mem = base.uniform(0.3, 0.7)
            tin, tout = base.randint(64, 2048), base.randint(32, 512)
            f = factor * (1 + noise.gauss(0, 0.02)) if factor else 1.0
            fh.write(
                f'{"," if i else ""}{{"request_id":"r{i:07d}","model":"{MODELS[i % 2]}",'
                f'"accelerator":"{ACCELERATORS[(i >> 1) % 2]}","route":"/v1/chat/completions",'
                f'"output_fingerprint":"{(i * 2654435761) % (1 << 32):08x}",'
                f'"latency_ms":{lat * f:.3f},"ttft_ms":{ttft * f:.3f},"itl_p95_ms":{itl * f:.3f},'
                f'"tokens_in":{tin},"tokens_out":{tout},"memory_pressure":{mem:.4f}}}\n')
        fh.write("]}\n")


def run_gate(workdir: Path, pairs: int) -> dict[str, float | int | str]:
    base = workdir / f"baseline-{pairs}.json"
    cand = workdir / f"candidate-{pairs}.json"
    if not base.exists():
        write_side(base, pairs, 1, 0.0)
    if not cand.exists():
        write_side(cand, pairs, 2, 1.0)
    out = workdir / f"report-{pairs}.json"
    run = run_measured([sys.executable, "-m", "tickgate", "gate", "--baseline", str(base), "--candidate",
                        str(cand), "--output", str(out), "--quiet"], interval=0.05)
    if run["code"] not in (0, 10, 20):
        raise SystemExit(f"gate failed ({run['code']}): {run['stderr'].strip()}")
    report = json.loads(out.read_text())
    return {"pairs": pairs, "decision": report["decision"], "matched": report["join"]["matched"],
            "seconds": round(run["wall_s"], 2),
            "peak_rss_largest_process_mib": round(run["largest_process_rss_mb"], 1),
            "peak_rss_all_processes_mib": round(run["peak_rss_mb"], 1),
            "input_mib": round((base.stat().st_size + cand.stat().st_size) / 2**20, 1)}


def breakdown(workdir: Path, pairs: int) -> dict[str, float]:
    """Seconds per stage of one gate, measured in this process."""
    from tickgate.gate.config import load_gate_config
    from tickgate.gate.inputs import read_side
    from tickgate.gate.comparison import join
    from tickgate.gate.report import build_report
    from tickgate.gate.decision import Outcome
    from tickgate.gate.segments import segment_summaries
    from tickgate.host.policy import load_policy

    clock = time.perf_counter
    out: dict[str, float] = {}
    start = clock()
    config = load_gate_config(load_policy(REPO / "policies" / "gate-default.yaml"))
    out["policy"] = clock() - start
    sides = []
    for label in ("baseline", "candidate"):
        start = clock()
        sides.append(read_side(workdir / f"{label}-{pairs}.json", label))
        out[f"read {label}"] = clock() - start
    start = clock()
    comparison = join(sides[0], sides[1], seed=config.seed)
    out["join"] = clock() - start
    outcomes = []
    for configured in config.signals:
        start = clock()
        outcomes.append(Outcome(configured, configured.signal.evaluate(comparison)))
        out[f"signal {configured.id}"] = clock() - start
    start = clock()
    segments = segment_summaries(comparison, config.segments)
    out["segment summaries"] = clock() - start
    start = clock()
    json.dumps(build_report(config, comparison, outcomes, segments), indent=2)
    out["report"] = clock() - start
    out["total"] = sum(out.values())
    return {key: round(value, 2) for key, value in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/tickgate-bench-gate"))
    ap.add_argument("--breakdown", action="store_true", help="also time each stage in this process")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    small = run_gate(args.workdir, max(1, args.pairs // 10))
    print(json.dumps(small))
    big = run_gate(args.workdir, args.pairs)
    print(json.dumps(big))
    print(json.dumps({"time_ratio": round(big["seconds"] / small["seconds"], 2)}))  # type: ignore[operator]
    if args.breakdown:
        print(json.dumps({"pairs": args.pairs, "seconds_in_process": breakdown(args.workdir, args.pairs)}))


if __name__ == "__main__":
    main()
