"""``prefix-cache-hit-rate``: hold when the candidate reuses less cached
prefix: a smaller share of prompt tokens served from the prefix cache means
more prefill work for the same traffic (a cache-unaware router, a smaller KV
pool, a changed block size or eviction policy).

The figure is the run-level ``aggregates.prefix_cache_hit_rate`` (hit tokens /
queried tokens) that replay reports of every kind give (vllm-v1, sglang,
trtllm, the seed scheduler and fleets, each where its report writes it:
:func:`tickgate.readers.replay_report.prefix_hit_rate`; a replay whose cache is
off or absent served no prefix: 0), as do vLLM and SGLang ``/metrics`` scrapes
and TensorRT-LLM iteration stats. A
drop past ``threshold`` (absolute, default 0.05 = 5 points) holds. It is one
figure per run, so there is no interval: the threshold carries the noise.
"""

from __future__ import annotations

from typing import Any

from ...interfaces.gate import GateSignal, SignalResult
from ..comparison import Comparison
from .common import FRACTION, not_recorded, pct, schema


class PrefixCacheHitRate(GateSignal):
    name = "prefix-cache-hit-rate"
    description = "hold when the prefix-cache hit rate drops by more than the policy allows (absolute points)"
    options_schema = schema(
        {
            "threshold": {**FRACTION, "default": 0.05, "description": "absolute drop, 0.05 = 5 points"},
        }
    )

    def evaluate(self, comparison: Comparison) -> SignalResult:
        threshold = float(self.options.get("threshold", 0.05))
        b = _rate(comparison.baseline.aggregates)
        c = _rate(comparison.candidate.aggregates)
        evidence = {"matched": comparison.matched}
        if b is None and c is None:
            return not_recorded(
                "run.aggregates.prefix_cache_hit_rate", threshold=threshold, evidence=evidence
            )
        if b is None or c is None:
            side = "baseline" if b is None else "candidate"
            return SignalResult(
                status="hold",
                reason="missing_evidence",
                threshold=threshold,
                evidence=evidence,
                message=f"the {side} reports no prefix_cache_hit_rate",
                next_action=f"capture the {side}'s prefix-cache counters (/metrics scrape or replay)",
            )
        common: dict[str, Any] = {
            "baseline": b,
            "candidate": c,
            "delta": c - b,
            "threshold": threshold,
            "unit": "absolute",
            "evidence": evidence,
        }
        head = f"prefix-cache hit rate {pct(b)} -> {pct(c)} ({(c - b) * 100:+.2f} points), allowed drop {pct(threshold)}"
        if b - c > threshold:
            return SignalResult(
                status="hold",
                reason="regression",
                message=f"{head}: regression",
                next_action="compare prefix caching, KV pool size, block size and routing of the "
                "candidate with the baseline's",
                **common,
            )
        return SignalResult(status="pass", reason="within_policy", message=head, **common)


def _rate(aggregates: dict[str, Any]) -> float | None:
    v = aggregates.get("prefix_cache_hit_rate")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
