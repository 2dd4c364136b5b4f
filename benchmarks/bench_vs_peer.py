"""tickgate against NVIDIA's aisimulate 0.13 on the same trace, in the same run (issue 18).

    python benchmarks/bench_vs_peer.py                          # 100k requests, 3 rounds
    python benchmarks/bench_vs_peer.py --requests 5000 --repeats 1
    python benchmarks/bench_vs_peer.py --skip-peer              # tickgate only
    python benchmarks/bench_vs_peer.py --aisimulate /path/to/venv/bin/aisimulate

Generates the seeded synthetic Mooncake-style trace of ``bench_replay.py``
(``gen_mooncake.py``, cached under ``--workdir``), then, ``--repeats`` times,
alternately runs

* tickgate as a user does, each command a fresh process::

      tickgate import mooncake TRACE --block-size 16 --output W.json
      tickgate replay --input W.json --policy fixtures/policies/vllm-v1-toy.yaml --output R.json

* aisimulate (not a dependency of this project; ``pip install
  "aisimulate==0.13.0.dev202610270000000085"`` in a venv of its own, found on
  PATH or given with ``--aisimulate``) on the same trace::

      aisimulate predict -c aisimulate-vllm.yaml --set "traffic.source.paths=[TRACE]"
          --set "engine.workers.aggregated.timing={type: fixed, prefill_ms: 30, decode_ms: 15}"

  with a config this script writes into the workdir from the policy's vLLM
  options (block size, GPU blocks, sequences, batched tokens, prefix caching,
  chunked prefill; see ``peer_config``), and prints the medians of the wall
  times (tickgate: import + replay), their ratio tickgate/aisimulate, the peak
  RSS of each command (its whole process tree: ``benchproc.py``) and the
  replay's fingerprint (from R.json: the same in every round, or it fails).

Each aisimulate run is checked: every request of the trace completed, the
timing estimator is the fixed one (the first request meets an idle engine, so
the smallest TTFT is one prefill step). Child processes run with
PYTHONHASHSEED=0. Wall times depend on the machine and its load; the script
prints the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench_replay import DEFAULT_POLICY, mooncake_trace
from benchproc import run_measured

PREFILL_MS, DECODE_MS = 30, 15  # the fixed step times issue 18 gives aisimulate
PEER_TIMING = f"{{type: fixed, prefill_ms: {PREFILL_MS}, decode_ms: {DECODE_MS}}}"


def vllm_options(policy: Path) -> dict[str, Any]:
    """The vllm-v1 scheduler options of ``policy``; refused where aisimulate has no equivalent."""
    from tickgate.host.policy import load_policy

    sched = load_policy(policy).data["scheduler"]
    options = dict(sched.get("options", {}))
    # options with no aisimulate knob must keep the values aisimulate's vLLM scheduler has
    fixed = {"policy": "fcfs", "watermark": 0.0, "long_prefill_token_threshold": 0}
    if sched["name"] != "vllm-v1" or any(options.get(k, v) != v for k, v in fixed.items()):
        raise SystemExit(f"{policy}: no aisimulate equivalent (needs vllm-v1 with {fixed})")
    return options


def peer_config(o: dict[str, Any], policy: Path) -> str:
    """aisimulate's prediction config for the vLLM engine with the policy's scheduler options ``o``."""
    def flag(key: str) -> str:
        return str(o.get(key, True)).lower()  # both default to true in the vllm-v1 mirror

    keys = [  # (depth, key, value, why)
        (0, "traffic", "", ""),
        (1, "source", "", ""),
        (2, "type", "trace", "replay a trace file, not synthetic traffic"),
        (2, "format", "mooncake", "gen_mooncake.py rows (timestamp, lengths, hash_ids)"),
        (2, "block_size", o["block_size"], "tokens per hash id, as tickgate import's (default 512)"),
        (1, "load", "", ""),
        (2, "type", "trace_timestamps", "arrive at the trace's times (default: 10 concurrent requests)"),
        (0, "engine", "", ""),
        (1, "mode", "aggregated", "one worker doing prefill and decode, like a tickgate replay"),
        (1, "backend", "vllm", "aisimulate's vLLM scheduler"),
        (1, "model", "Qwen/Qwen3-8B", "required; not passed to the engine with fixed timing"),
        (1, "hardware", "h100_sxm", "required; not passed to the engine with fixed timing"),
        (1, "context_length", 4096, "max_model_len must be set for vLLM: above any prompt + output (2560)"),
        (1, "enable_chunked_prefill", flag("enable_chunked_prefill"), "policy enable_chunked_prefill"),
        (1, "workers", "", ""),
        (2, "aggregated", "", ""),
        (3, "scheduler", "", ""),
        (4, "max_batched_tokens", o["max_num_batched_tokens"], "policy max_num_batched_tokens"),
        (4, "max_sequences", o["max_num_seqs"], "policy max_num_seqs"),
        (3, "kv_cache", "", ""),
        (4, "block_size", o["block_size"], "policy block_size"),
        (4, "prefix_caching", flag("enable_prefix_caching"), "policy enable_prefix_caching"),
        (4, "capacity", "", ""),
        (5, "type", "fixed", "a block count, not a share of GPU memory"),
        (5, "blocks", o["num_gpu_blocks"] - 1, "policy num_gpu_blocks - vLLM's null block: usable ones"),
    ]
    lines = [f"# benchmarks/bench_vs_peer.py: the vLLM engine of {policy.name} for aisimulate 0.13.",
             "# The trace path and the fixed step timing come in with --set on the command line."]
    for depth, key, value, why in keys:
        text = f"{'  ' * depth}{key}:{f' {value}' if value != '' else ''}"
        lines.append(f"{text:<40}# {why}" if why else text)
    return "\n".join(lines) + "\n"


def tickgate_cmd() -> list[str]:
    script = Path(sys.executable).with_name("tickgate")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tickgate"]


def checked(run: dict[str, Any], what: str) -> dict[str, Any]:
    if run["code"] != 0:
        raise SystemExit(f"{what} exited {run['code']}:\n{run['stdout'][-2000:]}\n{run['stderr'][-2000:]}")
    return run


def run_tickgate(trace: Path, policy: Path, block_size: int, workdir: Path, n: int,
                 env: dict[str, str]) -> dict[str, Any]:
    workload, report = workdir / "peer.workload.json", workdir / "peer.report.json"
    tg = tickgate_cmd()
    imp = checked(run_measured([*tg, "import", "mooncake", str(trace), "--block-size", str(block_size),
                                "--output", str(workload)], env=env), "tickgate import")
    rep = checked(run_measured([*tg, "replay", "--input", str(workload), "--policy", str(policy),
                                "--output", str(report)], env=env), "tickgate replay")
    summary = json.loads(report.read_text())["summary"]
    if summary["request_count"] != n:
        raise SystemExit(f"tickgate replayed {summary['request_count']} requests, expected {n}")
    return {"tool": "tickgate", "wall_s": round(imp["wall_s"] + rep["wall_s"], 2),
            "import_s": round(imp["wall_s"], 2), "replay_s": round(rep["wall_s"], 2),
            "import_rss_mb": round(imp["peak_rss_mb"], 1), "replay_rss_mb": round(rep["peak_rss_mb"], 1),
            "requests": summary["request_count"], "steps": summary["total_ticks"],
            "fingerprint": summary["trace_fingerprint"]}


def run_peer(exe: str, config: Path, trace: Path, workdir: Path, n: int,
             env: dict[str, str]) -> dict[str, Any]:
    out = workdir / "aisimulate-out"
    run = checked(run_measured([exe, "predict", "-c", str(config), "--set", f"traffic.source.paths=[{trace}]",
                                "--set", f"engine.workers.aggregated.timing={PEER_TIMING}",
                                "--output-dir", str(out), "--overwrite"], env=env), "aisimulate")
    pred = json.loads((out / "prediction.json").read_text())
    if pred["num_requests"] != n or pred["completed_requests"] != n:
        raise SystemExit(f"aisimulate read {pred['num_requests']} requests, completed "
                         f"{pred['completed_requests']}; expected {n}")
    estimator = pred["prediction_provenance"]["aggregated"]["estimator"]
    if estimator != "fixed" or pred["min_ttft_ms"] != PREFILL_MS:
        raise SystemExit(f"aisimulate did not apply the fixed timing: estimator {estimator}, "
                         f"smallest TTFT {pred['min_ttft_ms']} ms (expected {PREFILL_MS})")
    return {"tool": "aisimulate", "wall_s": round(run["wall_s"], 2), "rss_mb": round(run["peak_rss_mb"], 1),
            "requests": pred["num_requests"], "internal_wall_s": round(pred["wall_time_ms"] / 1000.0, 2),
            "sim_duration_s": round(pred["duration_ms"] / 1000.0, 1), "min_ttft_ms": pred["min_ttft_ms"],
            "min_itl_ms": pred["min_itl_ms"], "prefix_cache_reused_ratio": pred["prefix_cache_reused_ratio"]}


def peer_version(exe: str) -> str:
    """The aisimulate version of the interpreter the executable starts (its first line)."""
    try:
        python = Path(exe).read_text(errors="replace").splitlines()[0].removeprefix("#!").strip()
        code = "import importlib.metadata as m; print(m.version('aisimulate'))"
        return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, IndexError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000, help="trace size (default 100000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3, help="rounds of tickgate then aisimulate (default 3)")
    ap.add_argument("--policy", type=Path, default=DEFAULT_POLICY, help="tickgate policy (a vllm-v1 one)")
    ap.add_argument("--aisimulate", default=None, help="aisimulate executable (default: the one on PATH)")
    ap.add_argument("--skip-peer", action="store_true", help="run tickgate only")
    ap.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "tickgate-bench")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    config = args.workdir / "aisimulate-vllm.yaml"
    options = vllm_options(args.policy)
    config.write_text(peer_config(options, args.policy))
    exe = None if args.skip_peer else (args.aisimulate or shutil.which("aisimulate"))
    if exe and not shutil.which(exe):
        raise SystemExit(f"--aisimulate {exe}: not an executable")
    if not args.skip_peer and not exe:
        print("aisimulate not found (PATH or --aisimulate): running tickgate only", flush=True)
    trace = mooncake_trace(args.workdir, args.requests, args.seed)
    load_before = os.getloadavg()
    print(f"trace {trace}; policy {args.policy}; aisimulate {exe or '-'}"
          f"{' ' + peer_version(exe) if exe else ''}; config {config}; cpus {os.cpu_count()}; "
          f"load average {' '.join(f'{x:.2f}' for x in load_before)}", flush=True)
    rows: list[dict[str, Any]] = []
    for i in range(args.repeats):
        row = run_tickgate(trace, args.policy, options["block_size"], args.workdir, args.requests, env)
        rows.append({"round": i + 1, **row})
        print(json.dumps(rows[-1]), flush=True)
        if exe:
            rows.append({"round": i + 1, **run_peer(exe, config, trace, args.workdir, args.requests, env)})
            print(json.dumps(rows[-1]), flush=True)
    load_after = os.getloadavg()
    tick = [r for r in rows if r["tool"] == "tickgate"]
    peer = [r for r in rows if r["tool"] == "aisimulate"]
    fingerprints = sorted({r["fingerprint"] for r in tick})
    if len(fingerprints) != 1:
        raise SystemExit(f"tickgate fingerprints differ between rounds: {fingerprints}")
    med = statistics.median
    res: dict[str, Any] = {
        "requests": args.requests, "repeats": args.repeats,
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "tickgate_median_s": med(r["wall_s"] for r in tick),
        "tickgate_import_median_s": med(r["import_s"] for r in tick),
        "tickgate_replay_median_s": med(r["replay_s"] for r in tick),
        "tickgate_import_rss_mb": max(r["import_rss_mb"] for r in tick),
        "tickgate_replay_rss_mb": max(r["replay_rss_mb"] for r in tick),
        "tickgate_fingerprint": fingerprints[0], "tickgate_steps": tick[0]["steps"],
    }
    if peer:
        res["aisimulate_median_s"] = med(r["wall_s"] for r in peer)
        res["aisimulate_rss_mb"] = max(r["rss_mb"] for r in peer)
        res["ratio"] = round(res["tickgate_median_s"] / res["aisimulate_median_s"], 3)
    summary = json.dumps({"result": res, "runs": rows}, indent=2)
    (args.workdir / "bench_vs_peer.json").write_text(summary + "\n")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load_after)}")
    print(f"tickgate   median {res['tickgate_median_s']:8.2f} s (import {res['tickgate_import_median_s']:.2f}"
          f" + replay {res['tickgate_replay_median_s']:.2f}), peak RSS import"
          f" {res['tickgate_import_rss_mb']:.0f} MB / replay {res['tickgate_replay_rss_mb']:.0f} MB,"
          f" fingerprint {fingerprints[0]}")
    if peer:
        print(f"aisimulate median {res['aisimulate_median_s']:8.2f} s,"
              f" peak RSS {res['aisimulate_rss_mb']:.0f} MB")
        print(f"ratio tickgate/aisimulate {res['ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
