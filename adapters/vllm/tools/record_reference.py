#!/usr/bin/env python3
"""Record vLLM v1 scheduler reference traces for tickgate's conformance tests.

Runs the REAL vLLM scheduler through ``drive_vllm.py`` of the reference harness
(``../shared/tools/vllm-reference``; install it with its ``install.sh``) and
writes, per case, into ``--out-dir``:

* ``NAME.workload.json``  the workload in the harness format, config embedded;
* ``NAME.steps.jsonl``    one line per engine step (the harness's format);
* ``NAME.summary.json``   the harness's run summary (vLLM version, totals).

Cases come from a JSON file (default ``fixtures/vllm-reference/cases.json``)::

    [{"name": "fcfs-pressure", "gen": ["--seed", "3", "-n", "120"],
      "config": {"num_gpu_blocks": 256, "policy": "fcfs"}},
     {"name": "small", "workload": "workloads/small.json"}]

``gen`` arguments go to the harness's ``gen_workload.py``; ``workload`` is a
path relative to the harness directory; ``config`` overrides the workload's.

This script must run with the harness's Python (it imports vLLM), e.g.::

    ~/.cache/vllm-reference/venv/bin/python adapters/vllm/tools/record_reference.py \\
        --harness ../shared/tools/vllm-reference [--only NAME ...]

``--harness`` defaults to $VLLM_REFERENCE_DIR. Re-recording for another vLLM
version is the same command with that version installed in the harness venv.
All cases run in one process, so vLLM is imported once.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


class Deadlock(Exception):
    """vLLM stalled for good on this case: nothing worth comparing was recorded."""


def build_workload(case: dict, harness: Path) -> dict:
    """The case's workload (generated or copied) with its config merged in."""
    if "gen" in case:
        out = subprocess.run([sys.executable, str(harness / "gen_workload.py"), *case["gen"]],
                             check=True, capture_output=True, text=True).stdout
        workload = json.loads(out)
    else:
        workload = json.loads((harness / case["workload"]).read_text())
    if isinstance(workload, list):
        workload = {"requests": workload}
    config = dict(workload.get("config", {}))
    config.update(case.get("config", {}))
    return {"config": config, "requests": workload["requests"]}


def record(case: dict, harness: Path, out_dir: Path) -> dict:
    sys.path.insert(0, str(harness))
    import drive_vllm  # type: ignore[import-not-found]

    workload = build_workload(case, harness)
    cfg = dict(drive_vllm.DEFAULT_CONFIG)
    cfg.update(workload["config"])
    name = case["name"]
    steps_tmp = out_dir / f".{name}.steps.jsonl.tmp"
    with steps_tmp.open("w") as fh:
        summary = drive_vllm.run(workload, cfg, fh)
    if summary.get("deadlock"):
        steps_tmp.unlink()
        raise Deadlock(f"{name}: skipped, the reference run deadlocked (a request can never fit): "
                       f"{summary['deadlock']}")
    summary.pop("wall_s", None)
    summary.pop("requests_per_s", None)
    summary.pop("steps_per_s", None)
    (out_dir / f"{name}.workload.json").write_text(json.dumps(workload, separators=(",", ":")) + "\n")
    (out_dir / f"{name}.summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    os.replace(steps_tmp, out_dir / f"{name}.steps.jsonl")
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--harness", default=os.environ.get("VLLM_REFERENCE_DIR"),
                    help="directory of drive_vllm.py (default $VLLM_REFERENCE_DIR)")
    ap.add_argument("--cases", default=str(REPO / "fixtures" / "vllm-reference" / "cases.json"))
    ap.add_argument("--out-dir", default=str(REPO / "fixtures" / "vllm-reference"))
    ap.add_argument("--only", nargs="*", help="record only these case names")
    args = ap.parse_args(argv)
    if not args.harness:
        ap.error("give --harness or set VLLM_REFERENCE_DIR")
    harness = Path(args.harness).resolve()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = json.loads(Path(args.cases).read_text())
    chosen = [c for c in cases if not args.only or c["name"] in args.only]
    if any(c.get("config", {}).get("kv_offload_cpu_blocks", 0) > 0 for c in chosen) and \
            os.environ.get("PYTHONHASHSEED") != "0":
        # vLLM's CPU offloading walks a set of request ids (finished_req_ids), so the
        # harness refuses offload runs under another hash seed (drive_vllm.HASH_SEED_NOTE);
        # pin it here, as drive_vllm.py's own main() does
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    for case in cases:
        if args.only and case["name"] not in args.only:
            continue
        try:
            s = record(case, harness, out_dir)
        except Deadlock as exc:
            print(exc, flush=True)
            continue
        print(f"{case['name']}: {s['num_requests']} requests, {s['lines']} steps, "
              f"{s['totals']['preemptions']} preemptions, "
              f"{s['totals']['prefix_hit_tokens']} prefix-hit tokens (vLLM {s['vllm_version']})",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
