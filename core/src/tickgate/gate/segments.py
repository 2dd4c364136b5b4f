"""Segment summaries: the headline figures per backend, model, accelerator
(and every other segment key the observations carry), so a regression in one
backend stays visible when the total looks fine.

A pair belongs to the segment of its candidate value (the deployment under
test), or its baseline value when the candidate does not say.
"""

from __future__ import annotations

import math
from typing import Any

from .join import Comparison
from .stats import quantile

#: (report field, column) summarised with their p95 per side
METRICS = (("latency_p95_ms", "latency_ms"), ("ttft_p95_ms", "ttft_ms"))


def _p95(values: list[float]) -> float | None:
    return quantile(sorted(values), 0.95) if values else None


def _summary(comparison: Comparison, pairs: list[int]) -> dict[str, Any]:
    base, cand = comparison.baseline, comparison.candidate
    pb, pc = comparison.pairs_b, comparison.pairs_c
    be = sum(base.errors[pb[p]] for p in pairs)
    ce = sum(cand.errors[pc[p]] for p in pairs)
    ok = [p for p in pairs if not base.errors[pb[p]] and not cand.errors[pc[p]]]
    bf, cf = base.fingerprints, cand.fingerprints
    mismatched = sum(1 for p in ok if bf[pb[p]] is not None and cf[pc[p]] is not None
                     and bf[pb[p]] != cf[pc[p]])
    out: dict[str, Any] = {"pairs": len(pairs), "baseline_errors": be, "candidate_errors": ce,
                           "output_mismatches": mismatched}
    isnan = math.isnan
    for field, column in METRICS:
        bcol, ccol = base.num[column], cand.num[column]
        bv: list[float] = []
        cv: list[float] = []
        for p in ok:
            b, c = bcol[pb[p]], ccol[pc[p]]
            if not (isnan(b) or isnan(c)):
                bv.append(b)
                cv.append(c)
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
        groups: dict[str, list[int]] = {}
        for p, value in enumerate(comparison.segment_values(key)):
            if value is not None:
                groups.setdefault(value, []).append(p)
        if not groups:
            continue
        block: dict[str, Any] = {}
        for value in sorted(groups):
            pairs = groups[value]
            if len(pairs) == comparison.matched:  # one segment holds every pair: reuse the total
                everything = everything or _summary(comparison, pairs)
                block[value] = everything
            else:
                block[value] = _summary(comparison, pairs)
        out[key] = block
    return out
