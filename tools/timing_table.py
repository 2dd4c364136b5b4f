"""The table of docs/timing.md: measured against predicted, per point and value.

    python tools/timing_table.py fixtures/realdata/measured/points.jsonl DEFAULTS.jsonl [FITTED.jsonl]

DEFAULTS / FITTED are ``tickgate timing check --output`` files (with the shipped
defaults, and with ``--timing FITTED.yaml``). Prints Markdown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from statistics import median


def main(argv: list[str]) -> int:
    points = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line.strip()]
    runs = [{d["id"]: d["predicted"] for d in map(json.loads, Path(p).read_text().splitlines())} for p in argv[1:]]
    names = ["defaults", "fitted"][: len(runs)]
    head = "| point | value | measured | " + " | ".join(f"{n} | error" for n in names) + " |"
    print(head)
    print("|" + "---|" * (3 + 2 * len(runs)))
    errors: list[list[float]] = [[] for _ in runs]
    for p in points:
        measured = {k: v for k, v in p["measured"].items() if isinstance(v, (int, float))}
        if p["id"] not in runs[0]:
            print(f"| {p['id']} | (skipped: no lengths in the workload) | | " + " | ".join("" for _ in names * 2) + " |")
            continue
        for key, value in measured.items():
            cells = []
            for n, run in enumerate(runs):
                got = run[p["id"]].get(key)
                if got is None:
                    cells += ["", ""]
                    continue
                e = (got - value) / value
                errors[n].append(e)
                cells += [f"{got:.4g}", f"{e * 100:+.1f} %"]
            print(f"| {p['id']} | {key} | {value:.4g} | " + " | ".join(cells) + " |")
    for n, errs in zip(names, errors):
        within = sum(1 for e in errs if max(1 + e, 1 / (1 + e)) <= 1.5) / len(errs)
        print(f"\n{n}: {len(errs)} values, median |error| {median(abs(e) for e in errs) * 100:.1f} %, "
              f"{within * 100:.0f} % within 1.5x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
