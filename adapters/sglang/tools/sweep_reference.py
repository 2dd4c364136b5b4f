#!/usr/bin/env python3
"""Fresh seeded conformance sweeps of the ``sglang`` mirror against the real SGLang scheduler.

One command with the harness installed (``../shared/tools/sglang-reference/install.sh``)::

    python adapters/sglang/tools/sweep_reference.py run --seed 39000 -n 60 --dir /tmp/sweep [--jobs 2]

or its three steps, the middle one with the harness's Python (it imports SGLang)::

    python adapters/sglang/tools/sweep_reference.py cases --seed 39000 -n 60 --out /tmp/sweep/cases.json
    ~/.cache/sglang-reference/venv/bin/python adapters/sglang/tools/record_reference.py \\
        --harness ../shared/tools/sglang-reference --cases /tmp/sweep/cases.json --out-dir /tmp/sweep
    python adapters/sglang/tools/sweep_reference.py compare /tmp/sweep

``cases`` draws one random case per seed (``--seed``, ``--seed + 1``, ...): the schedule policy
(lpm, dfs-weight, fcfs, lof, random, or those of ``--policies``), page size, chunked prefill on or off and its size, the
prefill cap, the radix cache on or off, the pool (roomy or tight) and the ratio estimate (a low,
fast-decaying one provokes retractions), request rows, ``ignore_eos``, the context length, and a
``gen_workload.py`` line (requests, arrival rate, prompt and output lengths, shared prefixes and
duplicate prompts, priorities 0..2). Priorities are drawn because real traces carry them, but the
harness runs SGLang with priority scheduling off, as the mirror does, so both ignore them.
``ignore_eos`` with the radix cache off takes SGLang's ``add_one_req_ignore_eos``.

``compare`` replays every recorded case of a directory (``NAME.workload.json`` +
``NAME.steps.jsonl``) through the registered ``sglang`` plugin, the same check as ``tickgate
conformance sglang``, prints one line per case and a total, and exits 1 if any step of any case
differs (2 if the directory holds no recording). Cases SGLang itself deadlocks on are skipped by
``record_reference.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
DEFAULT_HARNESS = Path(os.environ.get("SGLANG_REFERENCE_DIR", REPO.parent / "shared" / "tools" / "sglang-reference"))
DEFAULT_PYTHON = Path(os.environ.get("SGLANG_REFERENCE_PYTHON",
                                     Path.home() / ".cache" / "sglang-reference" / "venv" / "bin" / "python"))
POLICIES = ("lpm", "dfs-weight", "fcfs", "lof", "random")


def draw_case(rng: random.Random, seed: int, policies: tuple[str, ...] = POLICIES) -> dict[str, Any]:
    """One random case, its workload generated from ``seed``, its policy one of ``policies``."""
    page = rng.choice([1, 1, 1, 4, 8, 16, 32])
    policy = rng.choice(policies)
    radix_off = rng.random() < 0.15
    cfg: dict[str, Any] = {"page_size": page, "schedule_policy": policy,
                           "max_running_requests": rng.choice([8, 16, 32, 64]),
                           "max_prefill_tokens": rng.choice([512, 1024, 2048, 4096, 16384])}
    cfg["chunked_prefill_size"] = -1 if rng.random() < 0.25 else rng.choice([128, 256, 512, 1024, 2048])
    if radix_off:
        cfg["disable_radix_cache"] = True
    if rng.random() < 0.2:
        cfg["ignore_eos"] = True
    pressure = rng.random() < 0.5
    cfg["max_total_tokens"] = rng.randint(2500, 6000) if pressure else rng.choice([8000, 16000])
    if pressure and rng.random() < 0.7:  # a low, fast-decaying estimate admits too much: retractions
        cfg.update(init_new_token_ratio=round(rng.uniform(0.1, 0.5), 2),
                   new_token_ratio_decay_steps=rng.choice([20, 50, 150, 600]))
    if rng.random() < 0.15:
        cfg["schedule_conservativeness"] = rng.choice([0.5, 1.3])
    if rng.random() < 0.1:
        cfg["retract_decode_steps"] = rng.choice([5, 50])
    if rng.random() < 0.1:
        cfg["clip_max_new_tokens_estimation"] = rng.choice([32, 128])
    if policy == "random":
        cfg["random_seed"] = rng.randint(0, 99)
    prompt = rng.choice(["8,120", "16,300", "16,500"])
    longest = int(prompt.split(",")[1])
    gen = ["--seed", str(seed), "-n", str(rng.randint(60, 200)), "--rate", f"{rng.uniform(0.5, 3.0):.2f}",
           "--prompt", prompt, "--output", rng.choice(["4,100", "8,200", "40,260"]), "--priorities", "3"]
    if rng.random() < 0.75:
        prefix = rng.choice(["32,200", "64,400"])
        longest += int(prefix.split(",")[1])
        gen += ["--prefix-groups", str(rng.randint(2, 8)), "--prefix-len", prefix,
                "--dup-frac", f"{rng.uniform(0, 0.3):.2f}"]
    if rng.random() < 0.1:
        # just above the longest possible prompt: long prompts' outputs are clipped
        # (init_req_max_new_tokens); a prompt with no room would be refused by both
        cfg["context_length"] = longest + rng.randint(3, 60)
    return {"name": f"sweep-{seed}", "gen": gen, "config": cfg}


def draw_cases(seed: int, n: int, policies: tuple[str, ...] = POLICIES) -> list[dict[str, Any]]:
    """``n`` cases for workload seeds ``seed``, ``seed + 1``, ... (the policy set is part
    of the generator's seed, so a narrower set draws other cases, not a subset)."""
    key = f"sglang-sweep:{seed}" if policies == POLICIES else f"sglang-sweep:{seed}:{','.join(policies)}"
    rng = random.Random(key)
    return [draw_case(rng, seed + i, policies) for i in range(n)]


def _policies(text: str) -> tuple[str, ...]:
    chosen = tuple(p for p in text.split(",") if p)
    unknown = sorted(set(chosen) - set(POLICIES))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(POLICIES)}, found {text!r}")
    return chosen


def compare_case(directory: Path, name: str) -> dict[str, Any]:
    """``tickgate conformance sglang`` on one recorded case: the check's result."""
    from tickgate import compare_steps, load_reference_workload, read_reference_steps
    from tickgate_sglang.conformance import SPEC

    requests, config = load_reference_workload(directory / f"{name}.workload.json", None, SPEC)
    reference = list(read_reference_steps(directory / f"{name}.steps.jsonl", SPEC))
    return compare_steps(reference, SPEC.run_mirror(requests, config), SPEC)


def compare_dir(directory: Path) -> int:
    names = sorted(p.name[: -len(".steps.jsonl")] for p in directory.glob("*.steps.jsonl"))
    if not names:
        print(f"error: {directory}: no NAME.steps.jsonl recordings", file=sys.stderr)
        return 2
    bad = steps = 0
    for name in names:
        result = compare_case(directory, name)
        div = result["first_divergence"]
        steps += result["steps_total"]
        same = div is None and result["steps_identical"] == result["steps_total"] == result["mirror_steps"]
        bad += not same
        note = "" if same else " DIVERGES: " + (div["description"] if div else
                                                f"the mirror ran {result['mirror_steps']} steps")
        print(f"{name}: {result['steps_identical']}/{result['steps_total']} identical{note}", flush=True)
    verdict = "all identical" if not bad else f"{bad} diverge"
    print(f"{len(names)} cases, {steps} steps, {verdict}")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    cases = sub.add_parser("cases", help="write random cases for record_reference.py --cases")
    cases.add_argument("--seed", type=int, default=39000, help="first workload seed (and the configs' seed)")
    cases.add_argument("-n", type=int, default=10, help="cases")
    cases.add_argument("--policies", type=_policies, default=POLICIES, help="comma-separated (default: all five)")
    cases.add_argument("--out", type=Path, required=True)
    cmp = sub.add_parser("compare", help="replay every recorded case of a directory against it")
    cmp.add_argument("directory", type=Path)
    run = sub.add_parser("run", help="cases, record them with the harness, compare")
    run.add_argument("--seed", type=int, default=39000)
    run.add_argument("-n", type=int, default=10)
    run.add_argument("--policies", type=_policies, default=POLICIES, help="comma-separated (default: all five)")
    run.add_argument("--dir", type=Path, required=True, help="where the cases and recordings go")
    run.add_argument("--harness", type=Path, default=DEFAULT_HARNESS,
                     help="directory of drive_sglang.py (default $SGLANG_REFERENCE_DIR or ../shared/tools/...)")
    run.add_argument("--python", type=Path, default=DEFAULT_PYTHON,
                     help="the harness venv's Python (default $SGLANG_REFERENCE_PYTHON or install.sh's venv)")
    run.add_argument("--jobs", type=int, default=1, help="cases recorded at once")
    args = ap.parse_args(argv)
    if args.command == "compare":
        return compare_dir(args.directory)
    out = args.out if args.command == "cases" else args.dir / "cases.json"
    drawn = draw_cases(args.seed, args.n, args.policies)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(drawn, indent=1) + "\n")
    print(f"{len(drawn)} cases -> {out}", flush=True)
    if args.command == "cases":
        return 0
    for need, what in ((args.harness / "drive_sglang.py", "the harness"), (args.python, "the harness's Python")):
        if not need.exists():
            print(f"error: {need}: {what} is not there (install it with the harness's install.sh)", file=sys.stderr)
            return 2
    subprocess.run([str(args.python), str(HERE / "record_reference.py"), "--harness", str(args.harness),
                    "--cases", str(out), "--out-dir", str(args.dir), "--jobs", str(args.jobs)], check=True)
    return compare_dir(args.dir)


if __name__ == "__main__":
    sys.exit(main())
