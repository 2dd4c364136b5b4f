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

from .join import Comparison, gather
from .stats import select_quantile

#: (report field, column) summarised with their p95 per side
METRICS = (("latency_p95_ms", "latency_ms"), ("ttft_p95_ms", "ttft_ms"))


def _p95(values: list[float]) -> float | None:
    return select_quantile(values, 0.95) if values else None


def _pick(comparison: Comparison, which: str, column: str, pairs: list[int] | None) -> Any:
    col = comparison.aligned(which, column)
    return col if pairs is None else gather(col, pairs)


def _summary(comparison: Comparison, pairs: list[int] | None) -> dict[str, Any]:
    """Figures over ``pairs`` (None: every pair)."""
    berr = _pick(comparison, "baseline", "errors", pairs)
    cerr = _pick(comparison, "candidate", "errors", pairs)
    keep = [not (b or c) for b, c in zip(berr, cerr)] if any(berr) or any(cerr) else None
    ok = pairs if keep is None else list(compress(pairs if pairs is not None else range(len(berr)), keep))

    def column(which: str, name: str) -> Any:
        return _pick(comparison, which, name, ok)

    bf, cf = column("baseline", "fingerprints"), column("candidate", "fingerprints")
    if None in bf or None in cf:
        mismatched = sum(1 for b, c in zip(bf, cf) if b != c and b is not None and c is not None)
    else:
        mismatched = sum(map(operator.ne, bf, cf))
    out: dict[str, Any] = {"pairs": len(berr), "baseline_errors": sum(berr), "candidate_errors": sum(cerr),
                           "output_mismatches": mismatched}
    for field, name in METRICS:
        bv, cv = column("baseline", name), column("candidate", name)
        if any(map(math.isnan, bv)) or any(map(math.isnan, cv)):
            both = [not (math.isnan(b) or math.isnan(c)) for b, c in zip(bv, cv)]
            bv, cv = list(compress(bv, both)), list(compress(cv, both))
        qb, qc = _p95(bv), _p95(cv)
        out[field] = {"baseline": qb, "candidate": qc,
                      "delta_pct": (qc / qb - 1.0) * 100.0 if qb and qc is not None else None}
    return out


def segment_summaries(comparison: Comparison, keys: list[str] | None) -> dict[str, dict[str, Any]]:
    if not comparison.per_request:
        return {}
    keys = sorted(keys if keys is not None else comparison.segment_keys())
    out: dict[str, dict[str, Any]] = {}
    everything: dict[str, Any] | None = None
    for key in keys:
        groups = comparison.groups(key)
        if not groups:
            continue
        block: dict[str, Any] = {}
        for value in sorted(groups):
            pairs = groups[value]
            if len(pairs) == comparison.matched:  # one segment holds every pair: reuse the total
                everything = everything or _summary(comparison, None)
                block[value] = everything
            else:
                block[value] = _summary(comparison, pairs)
        out[key] = block
    return out
