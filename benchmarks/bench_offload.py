"""CPU KV offload on the Mooncake conversation trace (issue 22): vllm-v1 with and without
``kv_offload_cpu_blocks``, timed by the roofline model.

    python benchmarks/bench_offload.py                       # the whole trace (12 031 requests)
    python benchmarks/bench_offload.py --limit 2000          # quicker
    python benchmarks/bench_offload.py --cpu-gb 400 --tp 2

The trace is ``fixtures/realdata/traces/mooncake_conversation_trace.jsonl`` as released
(512-token hash ids, real arrival times). The engine: Llama-3.1-8B on one H100-SXM-80GB
(``--tp`` GPUs), ``num_gpu_blocks: auto`` at vLLM's default memory fraction, 16-token blocks,
256 sequences, an 8192-token budget, chunked prefill and prefix caching; the CPU tier holds
``--cpu-gb`` GB of KV per GPU (vLLM's ``--kv-offloading-size``), loads and stores over a 64 GB/s
host link. Each replay is ``tickgate replay`` in a fresh process, as a user runs it. Prints, per
run, the first-admission hit rate by tier (GPU prefix cache, CPU tier) and in total, TTFT p50 and
p99, wall and CPU seconds and peak RSS, the ratios of the two replays' wall and CPU times, and the load average:
a script, not a test (the machine is noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from benchproc import run_measured  # noqa: E402

TRACE = REPO / "fixtures" / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
#: KV bytes per token of Llama-3.1-8B in bf16 (32 layers x 8 KV heads x 128 x K and V x 2 bytes)
LLAMA_8B_KV_TOKEN_BYTES = 131072


def policy(cpu_blocks: int, tp: int) -> str:
    options = {"block_size": 16, "num_gpu_blocks": "auto", "max_num_seqs": 256,
               "max_num_batched_tokens": 8192, "enable_chunked_prefill": True, "enable_prefix_caching": True}
    if cpu_blocks:
        options["kv_offload_cpu_blocks"] = cpu_blocks
    return json.dumps({"version": 1, "scheduler": {"name": "vllm-v1", "options": options},
                       "timing": {"name": "roofline", "options": {"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB",
                                                                  "tensor_parallel_size": tp}}})


def replay(workdir: Path, name: str, text: str, limit: int | None) -> tuple[dict, dict]:
    pol = workdir / f"{name}.yaml"
    pol.write_text(text)
    out = workdir / f"{name}.json"
    cmd = [sys.executable, "-m", "tickgate", "replay", "--input", str(TRACE), "--input-format", "mooncake",
           "--block-size", "512", "--policy", str(pol), "--output", str(out), "--quiet"]
    if limit:
        cmd += ["--limit", str(limit)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_measured(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the replay, reaped by run_measured
    result["cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if result["code"] != 0:
        raise SystemExit(f"replay failed: {result['stderr'].strip()}")
    return result, json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--cpu-gb", type=float, default=200.0)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tickgate-bench")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    block_bytes = 16 * LLAMA_8B_KV_TOKEN_BYTES // args.tp
    cpu_blocks = int(args.cpu_gb * 1e9 // block_bytes)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    walls = {}
    cpus = {}
    for name, blocks in (("gpu-only", 0), ("cpu-offload", cpu_blocks)):
        result, report = replay(args.workdir, f"offload-{name}", policy(blocks, args.tp), args.limit)
        sched = report["scheduler"]
        prompt = sched["prefix_cache"]
        tiers = sched.get("kv_offload", {}).get("hit_rate_by_tier", {"gpu": prompt["first_admission_hit_rate"],
                                                                     "cpu": 0.0})
        ttft = report["latency"]["ttft_ms"]
        walls[name] = result["wall_s"]
        cpus[name] = result["cpu_s"]
        print(f"{name} ({blocks} CPU blocks): {report['summary']['completed_requests']} requests, hit rate GPU "
              f"{tiers['gpu']:.2%} + CPU {tiers['cpu']:.2%} = {tiers['gpu'] + tiers['cpu']:.2%}, TTFT p50 "
              f"{ttft['p50'] / 1000:.1f} s, p99 {ttft['p99'] / 1000:.1f} s; {result['wall_s']:.1f} s wall, "
              f"{result['cpu_s']:.1f} s CPU, "
              f"{result['peak_rss_mb']:.0f} MB")
    print(f"replay time ratio offload / gpu-only: {walls['cpu-offload'] / walls['gpu-only']:.2f} wall, "
          f"{cpus['cpu-offload'] / cpus['gpu-only']:.2f} CPU")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
