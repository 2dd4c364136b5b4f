"""Run-level aggregates computed from per-request observations.

Used when a source has requests but no engine-reported summary (SSE captures,
aiperf per-request records) and when ``tickgate normalize`` merges several
captures of one run. Such aggregates say so in the provenance notes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .stats import summarize


def from_requests(requests: Iterable[dict[str, Any]]) -> dict[str, Any]:
    reqs = list(requests)
    agg: dict[str, Any] = {"request_count": len(reqs)}
    failed = sum(1 for r in reqs if r.get("error"))
    cut = sum(1 for r in reqs if not r.get("error") and r.get("streaming", {}).get("complete") is False)
    agg["failed"] = failed
    # a stream cut before its end is neither completed nor failed: partial evidence
    agg["completed"] = len(reqs) - failed - cut
    if reqs:
        agg["error_rate"] = round(failed / len(reqs), 6)
    tokens_in = [r["tokens_in"] for r in reqs if "tokens_in" in r]
    tokens_out = [r["tokens_out"] for r in reqs if "tokens_out" in r]
    if tokens_in and len(tokens_in) == len(reqs):
        agg["total_input_tokens"] = sum(tokens_in)
    if tokens_out and len(tokens_out) == len(reqs):
        agg["total_output_tokens"] = sum(tokens_out)
    for key in ("latency_ms", "ttft_ms"):
        values = [r[key] for r in reqs if key in r]
        if values:
            agg[key] = summarize(values)
    gaps = [g for r in reqs for g in r.get("itl_ms", [])]
    if gaps:
        agg["itl_ms"] = summarize(gaps)
    return agg
