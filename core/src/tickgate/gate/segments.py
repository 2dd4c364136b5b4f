"""Segment summaries: the headline figures per backend, model, accelerator
(and every other segment key the observations carry), so a regression in one
backend stays visible when the total looks fine.

A pair belongs to the segment of its candidate value (the deployment under
test), or its baseline value when the candidate does not say.
"""

from __future__ import annotations

import math
import operator
from itertools import compress
from typing import Any

from .comparison import Comparison, gather

SIDES = ("baseline", "candidate")
#: (report field, column) summarised with their p95 per side
METRICS = (("latency_p95_ms", "latency_ms"), ("ttft_p95_ms", "ttft_ms"))


def _summary(comparison: Comparison, group: tuple[str, str] | None, clean: bool) -> dict[str, Any]:
    """Figures over one segment's pairs (``group`` None: every pair). ``clean``:
    no pair has an error or an output mismatch at all, so neither can a segment."""

    def column(which: str, name: str, pairs: list[int] | None) -> Any:
        if group is None:
            col = comparison.aligned(which, name)
            return col if pairs is None else gather(col, pairs)
        if pairs is None:
            return comparison.in_group(which, name, *group)
        return gather(comparison.aligned(which, name), pairs)

    size = comparison.matched if group is None else comparison.group_sizes(group[0])[group[1]]
    out: dict[str, Any] = {"pairs": size, "baseline_errors": 0, "candidate_errors": 0, "output_mismatches": 0}
    ok: list[int] | None = None
    if not clean:
        rows = None if group is None else comparison.groups(group[0])[group[1]]
        berr, cerr = column("baseline", "errors", rows), column("candidate", "errors", rows)
        out["baseline_errors"], out["candidate_errors"] = sum(berr), sum(cerr)
        base_rows = rows if rows is not None else range(len(berr))
        ok = list(compress(base_rows, [not (b or c) for b, c in zip(berr, cerr)]))
        bf, cf = column("baseline", "fingerprints", ok), column("candidate", "fingerprints", ok)
        out["output_mismatches"] = sum(
            1 for b, c in zip(bf, cf) if b != c and b is not None and c is not None
        )
    for field, name in METRICS:
        qb: float | None
        qc: float | None
        if ok is None and not any(comparison.has_nan(comparison.aligned(w, name)) for w in SIDES):
            # every pair of the segment counts: the quantiles the signals computed
            qb, qc = (
                comparison.quantile(comparison.aligned(w, name), 0.95)
                if group is None
                else comparison.group_quantile(w, name, *group, 0.95)
                for w in SIDES
            )
        else:
            bv, cv = column("baseline", name, ok), column("candidate", name, ok)
            if comparison.has_nan(bv) or comparison.has_nan(cv):
                both = [not (math.isnan(b) or math.isnan(c)) for b, c in zip(bv, cv)]
                bv, cv = list(compress(bv, both)), list(compress(cv, both))
            qb = comparison.quantile(bv, 0.95) if bv else None
            qc = comparison.quantile(cv, 0.95) if cv else None
        out[field] = {
            "baseline": qb,
            "candidate": qc,
            "delta_pct": (qc / qb - 1.0) * 100.0 if qb and qc is not None else None,
        }
    return out


def _clean(comparison: Comparison) -> bool:
    """No errors and no fingerprint differences anywhere (the common, fast case)."""
    if any(comparison.aligned("baseline", "errors")) or any(comparison.aligned("candidate", "errors")):
        return False
    bf, cf = comparison.aligned("baseline", "fingerprints"), comparison.aligned("candidate", "fingerprints")
    return not any(map(operator.ne, bf, cf))


def segment_summaries(comparison: Comparison, keys: list[str] | None) -> dict[str, dict[str, Any]]:
    if not comparison.per_request:
        return {}
    keys = sorted(keys if keys is not None else comparison.segment_keys())
    out: dict[str, dict[str, Any]] = {}
    everything: dict[str, Any] | None = None
    clean = _clean(comparison)
    for key in keys:
        sizes = comparison.group_sizes(key)
        if not sizes:
            continue
        block: dict[str, Any] = {}
        for value in sorted(sizes):
            if sizes[value] == comparison.matched:  # one segment holds every pair: reuse the total
                everything = everything or _summary(comparison, None, clean)
                block[value] = everything
            else:
                block[value] = _summary(comparison, (key, value), clean)
        out[key] = block
    return out
