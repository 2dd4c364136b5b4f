#!/usr/bin/env python3
"""Fresh seeded conformance sweeps of the ``vllm-v1`` mirror against the real vLLM scheduler.

Three steps, the middle one with the reference harness's Python (it imports vLLM)::

    python adapters/vllm/tools/sweep_reference.py cases --kind offload --seed 1000 -n 15 --out /tmp/sweep/cases.json
    ~/.cache/vllm-reference/venv/bin/python adapters/vllm/tools/record_reference.py \\
        --harness ../shared/tools/vllm-reference --cases /tmp/sweep/cases.json --out-dir /tmp/sweep
    .venv/bin/python adapters/vllm/tools/sweep_reference.py compare /tmp/sweep

``cases`` draws random configs (block size, budget, pool, policy, chunking knobs; with ``--kind
offload`` CPU tiers, load/store steps, chunk sizes, thresholds; ``--kind quiet``: offload with
large pools and sparse arrivals, so decode phases run the fast paths; ``--kind spec``: drafts) and
a ``gen_workload.py`` line per case, all from ``--seed``. ``compare`` replays every recorded case
of the directory through the registered plugin on its fast paths and its slow path, prints one
line per case and path, and exits 1 if any step differs (without prefix caching, offload cases
also compare vLLM's GPU block ids). Cases vLLM itself deadlocks on are skipped by
``record_reference.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

KINDS = ("plain", "spec", "offload", "quiet")


def draw_case(rng: random.Random, kind: str, seed: int) -> dict:
    """One random case of ``kind``, the workload generated from ``seed``."""
    quiet = kind == "quiet"
    cfg = {"block_size": rng.choice([8, 16]), "max_num_seqs": rng.choice([8, 16, 32]),
           "max_num_batched_tokens": rng.choice([256, 512, 1024]), "max_model_len": 4096,
           "num_gpu_blocks": rng.randint(250, 900) if quiet else rng.randint(90, 300),
           "enable_prefix_caching": rng.random() < 0.65,
           "policy": "fcfs" if quiet else rng.choice(["fcfs", "fcfs", "priority"])}
    if not quiet and rng.random() < 0.3:
        cfg["long_prefill_token_threshold"] = rng.choice([64, 128])
    if kind in ("offload", "quiet"):
        cfg.update(kv_offload_cpu_blocks=rng.choice([16, 48, 128, 1024, 4096]),
                   kv_offload_load_steps=rng.choice([0, 0, 1, 3]),
                   kv_offload_store_steps=rng.choice([1, 1, 2, 4]))
        if rng.random() < 0.4:
            cfg["kv_offload_extra_config"] = {"blocks_per_chunk": rng.choice([1, 2, 4]),
                                              "store_threshold": rng.choice([0, 2])}
    if kind == "spec" or (kind == "offload" and rng.random() < 0.5):
        cfg.update(num_speculative_tokens=rng.randint(1, 4), spec_method=rng.choice(["ngram", "eagle", "draft_model"]),
                   acceptance_rates=round(rng.uniform(0.3, 0.9), 2), seed=rng.randint(0, 99))
    prefixes = []
    if rng.random() < 0.75:
        prefixes = ["--prefix-groups", str(rng.randint(2, 6)), "--prefix-len", "32,256",
                    "--dup-frac", str(round(rng.uniform(0, 0.4), 2))]
    rate = rng.uniform(0.05, 0.4) if quiet else rng.uniform(0.5, 3)
    gen = ["--seed", str(seed), "-n", str(rng.randint(40, 140)), "--rate", f"{rate:.2f}",
           "--prompt", "8,500", "--output", "20,300" if quiet else "2,150", "--priorities", "3", *prefixes]
    return {"name": f"{kind}-{seed}", "gen": gen, "config": cfg}


def compare_dir(directory: Path) -> int:
    from tickgate_vllm.conformance import compare, load_reference_workload, read_steps, run_mirror_paths

    bad = 0
    for steps_path in sorted(directory.glob("*.steps.jsonl")):
        name = steps_path.name[:-len(".steps.jsonl")]
        requests, config = load_reference_workload(directory / f"{name}.workload.json", None)
        reference = list(read_steps(steps_path))
        for slow in (False, True):
            lines, paths = run_mirror_paths(requests, config, slow)
            result = compare(reference, lines)
            div = result["first_divergence"]
            note = div["description"] if div else ""
            if (div is None and config.get("kv_offload_cpu_blocks", 0) > 0
                    and not config.get("enable_prefix_caching")):
                if [(x["kv_load"], x["kv_store"]) for x in lines] != [(x["kv_load"], x["kv_store"]) for x in reference]:
                    note = "GPU block ids differ"
            bad += bool(note)
            print(f"{name} {'slow' if slow else 'fast'}: {result['steps_identical']}/{result['steps_total']} "
                  f"identical, {paths['mirror_fast_path_steps']} from fast paths {note}".rstrip(), flush=True)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    cases = sub.add_parser("cases", help="write random cases for record_reference.py --cases")
    cases.add_argument("--kind", choices=KINDS, default="plain")
    cases.add_argument("--seed", type=int, default=1000, help="first workload seed (and the configs' seed)")
    cases.add_argument("-n", type=int, default=10, help="cases")
    cases.add_argument("--out", type=Path, required=True)
    cmp = sub.add_parser("compare", help="replay every recorded case of a directory against it")
    cmp.add_argument("directory", type=Path)
    args = ap.parse_args(argv)
    if args.command == "compare":
        return compare_dir(args.directory)
    rng = random.Random(f"{args.kind}:{args.seed}")
    out = [draw_case(rng, args.kind, args.seed + i) for i in range(args.n)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(out)} cases -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
