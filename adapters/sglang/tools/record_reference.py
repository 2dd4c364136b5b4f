#!/usr/bin/env python3
"""Record SGLang scheduler reference traces for tickgate's conformance tests.

Runs the REAL SGLang 0.5.23 scheduler through ``drive_sglang.py`` of the reference
harness (``../shared/tools/sglang-reference``; install it with its ``install.sh``)
and writes, per case, into ``--out-dir``:

* ``NAME.workload.json``  the workload in the harness format, config embedded;
* ``NAME.steps.jsonl``    one line per engine step (the harness's format);
* ``NAME.summary.json``   the harness's run summary (SGLang version, totals).

Cases come from a JSON file (default ``fixtures/sglang-reference/cases.json``)::

    [{"name": "fcfs-pressure", "gen": ["--seed", "3", "-n", "120"],
      "config": {"max_total_tokens": 6000, "schedule_policy": "fcfs"}}]

``gen`` arguments go to the vLLM harness's ``gen_workload.py`` (the SGLang harness
reads the same request fields: its README says so); ``workload`` is a path
relative to the SGLang harness directory; ``config`` overrides the workload's.

Run with the harness's Python (it imports SGLang), e.g.::

    ~/.cache/sglang-reference/venv/bin/python adapters/sglang/tools/record_reference.py \\
        --harness ../shared/tools/sglang-reference [--only NAME ...]

Each case runs ``drive_sglang.py`` in its own process (SGLang's scheduler sets up
process groups and IPC sockets once per process); ``--jobs N`` runs N of them at
once (each case is still one deterministic process). A case SGLang deadlocks on
(a request that can never fit) is skipped with a message: nothing worth comparing
was recorded. ``sweep_reference.py`` draws fresh cases for this script.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
VOLATILE = ("wall_s", "steps_per_s")


class Deadlock(Exception):
    """SGLang stalled for good on this case: nothing worth comparing was recorded."""


def build_workload(case: dict, harness: Path) -> dict:
    if "gen" in case:
        gen = harness.parent / "vllm-reference" / "gen_workload.py"
        out = subprocess.run([sys.executable, str(gen), *case["gen"]], check=True, capture_output=True,
                             text=True).stdout
        workload = json.loads(out)
    else:
        workload = json.loads((harness / case["workload"]).read_text())
    if isinstance(workload, list):
        workload = {"requests": workload}
    config = dict(workload.get("config", {}))
    config.update(case.get("config", {}))
    return {"config": config, "requests": workload["requests"]}


def record(case: dict, harness: Path, out_dir: Path) -> dict:
    """Record one case into ``out_dir``; its summary (wall-clock fields dropped)."""
    name = case["name"]
    workload = build_workload(case, harness)
    with tempfile.TemporaryDirectory() as tmp:
        wl = Path(tmp) / "w.json"
        wl.write_text(json.dumps(workload))
        steps, summ = Path(tmp) / "s.jsonl", Path(tmp) / "summary.json"
        done = subprocess.run([sys.executable, str(harness / "drive_sglang.py"), str(wl), "--out", str(steps),
                               "--summary", str(summ)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": "0"})
        if done.returncode:
            raise SystemExit(f"{name}: drive_sglang.py failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        summary = json.loads(summ.read_text())
        if summary.get("deadlock"):
            raise Deadlock(f"{name}: skipped, the reference run deadlocked: {summary['deadlock']}")
        for key in VOLATILE:
            summary.pop(key, None)
        (out_dir / f"{name}.workload.json").write_text(json.dumps(workload, separators=(",", ":")) + "\n")
        (out_dir / f"{name}.steps.jsonl").write_bytes(steps.read_bytes())
        (out_dir / f"{name}.summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return summary


def _record_and_report(case: dict, harness: Path, out_dir: Path) -> None:
    try:
        s = record(case, harness, out_dir)
    except Deadlock as exc:
        print(exc, flush=True)
        return
    t = s["totals"]
    print(f"{case['name']}: {t['steps']} steps, {t['retractions']} retractions, "
          f"{t['prefix_hit_tokens']} hit tokens", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--harness", type=Path, default=os.environ.get("SGLANG_REFERENCE_DIR"))
    ap.add_argument("--cases", type=Path, default=REPO / "fixtures" / "sglang-reference" / "cases.json")
    ap.add_argument("--out-dir", type=Path, default=REPO / "fixtures" / "sglang-reference")
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--jobs", type=int, default=1, help="cases recorded at once (one process each)")
    a = ap.parse_args(argv)
    if a.harness is None:
        raise SystemExit("--harness (or SGLANG_REFERENCE_DIR) is required")
    cases = [c for c in json.loads(a.cases.read_text()) if not a.only or c["name"] in a.only]
    a.out_dir.mkdir(parents=True, exist_ok=True)
    harness = a.harness.resolve()
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for future in [pool.submit(_record_and_report, case, harness, a.out_dir) for case in cases]:
            future.result()


if __name__ == "__main__":
    main()
