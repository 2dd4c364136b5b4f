"""Scheduler totals of ``vllm-v1`` for the replay report (``report["scheduler"]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .v1_scheduler import VllmV1Scheduler


def _hist_percentile(hist: dict[int, int], count: int, q: float) -> int:
    """Nearest-rank percentile of a value -> steps histogram (exact, no per-step storage)."""
    rank = max(1, -(-count * q // 100))
    seen = 0
    for value in sorted(hist):
        seen += hist[value]
        if seen >= rank:
            return value
    return 0  # pragma: no cover


def summary(s: "VllmV1Scheduler") -> dict[str, Any]:
    steps = s.t_steps
    return {
        "engine": "vllm-v1",
        "policy": s.cfg.policy,
        "prefix_cache": {
            "enabled": s.caching,
            "hit_tokens": s.t_hit_tokens,
            "queried_tokens": s.t_query_tokens,
            "hit_rate": round(s.t_hit_tokens / s.t_query_tokens, 6) if s.t_query_tokens else 0.0,
            "first_admission_hit_tokens": s.t_first_hit_tokens,
            "first_admission_hit_rate": round(s.t_first_hit_tokens / s.t_first_query_tokens, 6)
            if s.t_first_query_tokens else 0.0,
        },
        "admissions": s.t_admissions,
        "preemptions": s.t_preemptions,
        "scheduled_tokens": {
            "total": s.t_sched_tokens,
            "steps": steps,
            "mean_per_step": round(s.t_sched_tokens / steps, 6) if steps else 0.0,
            "p50_per_step": _hist_percentile(s.tok_hist, steps, 50) if steps else 0,
            "p99_per_step": _hist_percentile(s.tok_hist, steps, 99) if steps else 0,
            "max_per_step": max(s.tok_hist) if s.tok_hist else 0,
        },
        "kv_blocks": {
            "usable": s.pool.usable,
            "peak_after_schedule": s.kv_peak,
            "mean_after_schedule": round(s.kv_weighted / steps, 6) if steps else 0.0,
        },
    }
