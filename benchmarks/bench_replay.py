"""Scale benchmark: import a trace and replay it, per size, in fresh processes.

    python benchmarks/bench_replay.py                       # 10k and 100k synthetic + Azure code trace
    python benchmarks/bench_replay.py --sizes 10000,100000,1000000
    python benchmarks/bench_replay.py --policy fixtures/policies/vllm-v1-toy.yaml
    python benchmarks/bench_replay.py --sizes 100000 --profile replay   # cProfile top functions

For each size it generates a seeded synthetic Mooncake-style trace
(``gen_mooncake.py``: Poisson 3 req/s, input 64-2048, output 16-512, unique
hash ids at block size 16; cached under ``--workdir``), then runs exactly
what a user runs, each phase in its own process so peak RSS is per phase::

    tickgate import mooncake TRACE --block-size 16 --output W.json
    tickgate replay --input W.json --policy POLICY --output R.json

and prints wall time, peak RSS (``resource.getrusage``: the process plus, for
a large replay, its two helper processes, each counted at the largest one's
peak; for a large import its one helper), CPU seconds of the replay (all processes), requests/s and
steps/s (engine steps, i.e. ``summary.total_ticks``, per second of replay).
``--azure`` adds the real Azure code trace from fixtures/realdata.
It is a script, not a test: wall-clock figures depend on the machine and its
load, which it prints (load average) next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_POLICY = REPO / "fixtures" / "policies" / "vllm-v1-toy.yaml"
FALLBACK_POLICY = HERE / "policies" / "seed-bench.yaml"
AZURE = REPO / "fixtures" / "realdata" / "traces" / "AzureLLMInferenceTrace_code.csv"


def _phase(argv: list[str]) -> int:
    """Child process: run one tickgate command in-process; print wall time and peak RSS."""
    profile = os.environ.get("TICKGATE_BENCH_PROFILE") == "1"
    from tickgate.commands.cli import main

    start = time.perf_counter()
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        code = prof.runcall(main, argv)
        wall = time.perf_counter() - start
        stats = pstats.Stats(prof, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(25)
    else:
        code = main(argv)
        wall = time.perf_counter() - start
    me = resource.getrusage(resource.RUSAGE_SELF)
    # a replay's helpers (the workload reader, the sidecar: docs/workload.md) and an
    # import's (the second half's reader: docs/importers.md) have their own peaks;
    # getrusage gives the largest child's, counted once per helper as if all
    # peaked at once (an upper bound of the total)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    helpers = (1 if argv[0] == "import" else 2) if kids.ru_maxrss else 0
    print(json.dumps({"code": code, "wall_s": wall, "rss_mb": (me.ru_maxrss + helpers * kids.ru_maxrss) / 1024.0,
                      "child_rss_mb": kids.ru_maxrss / 1024.0,
                      "cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime}))
    return 0


def run_phase(args: list[str], profile: bool = False) -> dict[str, Any]:
    env = dict(os.environ)
    if profile:
        env["TICKGATE_BENCH_PROFILE"] = "1"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_phase", *args],
                          capture_output=True, text=True, env=env)
    total = time.perf_counter() - start
    if profile:
        sys.stderr.write(proc.stderr)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"phase {args[0]} failed:\n{proc.stdout}\n{proc.stderr}")
    out = json.loads(lines[-1])
    if out["code"] != 0:
        raise SystemExit(f"phase {args[0]} exited {out['code']}:\n{proc.stderr}")
    out["process_s"] = total  # including interpreter start-up
    return out


def mooncake_trace(workdir: Path, size: int, seed: int) -> Path:
    """The seeded synthetic trace of ``size`` requests (``gen_mooncake.py``), generated once per workdir."""
    trace = workdir / f"mooncake-{size}-seed{seed}.jsonl"
    if not trace.exists():
        tmp = trace.with_suffix(".tmp")
        subprocess.run([sys.executable, str(HERE / "gen_mooncake.py"), "--n", str(size), "--seed", str(seed),
                        "--out", str(tmp)], check=True)
        tmp.replace(trace)
    return trace


def bench(label: str, fmt: str, trace: Path, policy: Path, workdir: Path, n_hint: int | None,
          block_size: int | None, profile: str | None) -> dict[str, Any]:
    workload = workdir / f"{label}.workload.json"
    report = workdir / f"{label}.report.json"
    imp_args = ["import", fmt, str(trace), "--output", str(workload), "--quiet"]
    if block_size is not None:
        imp_args += ["--block-size", str(block_size)]
    imp = run_phase(imp_args, profile == "import")
    rep = run_phase(["replay", "--input", str(workload), "--policy", str(policy), "--output", str(report),
                     "--quiet"], profile == "replay")
    data = json.loads(report.read_text())
    summary = data["summary"]
    n = summary["request_count"]
    if n_hint is not None and n != n_hint:
        raise SystemExit(f"{label}: expected {n_hint} requests, replayed {n}")
    total = imp["process_s"] + rep["process_s"]
    row = {
        "label": label,
        "requests": n,
        "steps": summary["total_ticks"],
        "import_s": round(imp["process_s"], 2),
        "replay_s": round(rep["process_s"], 2),
        "total_s": round(total, 2),
        "import_rss_mb": round(imp["rss_mb"], 1),
        "replay_rss_mb": round(rep["rss_mb"], 1),
        "replay_helper_rss_mb": round(rep["child_rss_mb"], 1),
        "replay_cpu_s": round(rep["cpu_s"], 2),
        "requests_per_s": round(n / total),
        "steps_per_s": round(summary["total_ticks"] / rep["process_s"]),
        "fingerprint": summary["trace_fingerprint"],
    }
    return row


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_phase"]:
        return _phase(argv[1:])
    ap = argparse.ArgumentParser(description="Import + replay scale benchmark.")
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated request counts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", type=Path, default=None,
                    help=f"policy YAML (default: {DEFAULT_POLICY.relative_to(REPO)} if present, "
                         f"else {FALLBACK_POLICY.relative_to(REPO)})")
    ap.add_argument("--workdir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "tickgate-bench")
    ap.add_argument("--no-azure", action="store_true", help="skip the Azure code trace")
    ap.add_argument("--profile", choices=("import", "replay"), default=None,
                    help="print the cProfile top functions of that phase (slows it down)")
    args = ap.parse_args(argv)
    policy = args.policy or (DEFAULT_POLICY if DEFAULT_POLICY.exists() else FALLBACK_POLICY)
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(f"policy {policy}; cpus {os.cpu_count()}; load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for size in (int(s) for s in args.sizes.split(",") if s):
        trace = mooncake_trace(args.workdir, size, args.seed)
        rows.append(bench(f"mooncake-{size}", "mooncake", trace, policy, args.workdir, size, 16, args.profile))
        print(json.dumps(rows[-1]), flush=True)
    if not args.no_azure:
        rows.append(bench("azure-code", "azure", AZURE, policy, args.workdir, None, None, args.profile))
        print(json.dumps(rows[-1]), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"{'trace':<18}{'requests':>10}{'steps':>12}{'import s':>10}{'replay s':>10}{'total s':>9}"
          f"{'RSS MB (imp/rep)':>18}{'req/s':>9}{'steps/s':>10}")
    for r in rows:
        print(f"{r['label']:<18}{r['requests']:>10}{r['steps']:>12}{r['import_s']:>10}{r['replay_s']:>10}"
              f"{r['total_s']:>9}{r['import_rss_mb']:>9}/{r['replay_rss_mb']:<8}{r['requests_per_s']:>9}"
              f"{r['steps_per_s']:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
