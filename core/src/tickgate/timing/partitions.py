"""The error table of a check by partition: engine, GPU, model, dense/MoE, precision, mode.

Each line gives, for one value of one grouping, how many rows were predicted and skipped
(coverage), and per measured figure the median absolute percentage error, the median signed
error (bias: negative is predicted too fast) and the share within a factor of 1.5. The same
function writes the table on screen and the generated one in docs/timing.md.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from statistics import median
from typing import Any

__all__ = ["GROUPINGS", "partition_rows", "partition_table"]

#: the groupings, in the order the table shows them
GROUPINGS = ("engine", "gpu", "kind", "precision", "model", "mode")


def _within(error: float) -> bool:
    ratio = 1 + error
    return ratio > 0 and max(ratio, 1 / ratio) <= 1.5


def partition_rows(results: Iterable[Any], groupings: Iterable[str] = GROUPINGS) -> list[dict[str, Any]]:
    """One record per (grouping, value), then the total: counts and per-figure error statistics."""
    results = list(results)
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for r in results:
        part = getattr(r.point, "partition", {})
        for grouping in groupings:
            if grouping in part:
                groups[(grouping, part[grouping])].append(r)
    order = {g: i for i, g in enumerate(groupings)}
    records = [
        _record(g, v, rs) for (g, v), rs in sorted(groups.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
    ]
    records.append(_record("all", "", results))
    return records


def _record(grouping: str, value: str, results: list[Any]) -> dict[str, Any]:
    predicted = [r for r in results if r.predicted is not None]
    record: dict[str, Any] = {
        "grouping": grouping,
        "value": value,
        "rows": len(results),
        "predicted": len(predicted),
        "coverage": len(predicted) / len(results) if results else 0.0,
    }
    figures: dict[str, list[float]] = defaultdict(list)
    for r in predicted:
        for key, error in r.errors().items():
            figures[key].append(error)
    for key in sorted(figures):
        errors = figures[key]
        record[key] = {
            "median_ape": median(abs(e) for e in errors),
            "bias": median(errors),
            "within_1_5x": sum(map(_within, errors)) / len(errors),
        }
    return record


def partition_table(results: Iterable[Any], groupings: Iterable[str] = GROUPINGS) -> list[str]:
    """The table's lines, for the screen."""
    records = partition_rows(results, groupings)
    keys = sorted({k for r in records for k in r if isinstance(r[k], dict)})
    head = f"{'grouping':10s} {'value':34s} {'rows':>5s} {'cover':>6s}"
    for key in keys:
        head += f"  {key + ' |err|':>14s} {'bias':>7s} {'<1.5x':>6s}"
    lines = [head]
    for r in records:
        line = f"{r['grouping']:10s} {r['value'][:34]:34s} {r['rows']:5d} {r['coverage'] * 100:5.0f}%"
        for key in keys:
            stats = r.get(key)
            if stats is None:
                line += f"  {'-':>14s} {'-':>7s} {'-':>6s}"
            else:
                line += (
                    f"  {stats['median_ape'] * 100:13.1f}% {stats['bias'] * 100:+6.1f}% "
                    f"{stats['within_1_5x'] * 100:5.0f}%"
                )
        lines.append(line)
    return lines
