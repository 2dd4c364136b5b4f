"""Scheduler totals of ``vllm-v1`` for the replay report (``report["scheduler"]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .state import SchedulerState


def _hist_percentile(hist: dict[int, int], count: int, percent: int) -> int:
    """Nearest-rank percentile (numpy's "inverted_cdf") of a value -> steps histogram,
    for a whole ``percent``: exact in integers, no per-step storage. Not
    :func:`tickgate.util.quantile.quantile` (linear between ranks): a step schedules
    a whole number of tokens, and this figure is one of them."""
    rank = max(1, -(-count * percent // 100))
    seen = 0
    for value in sorted(hist):
        seen += hist[value]
        if seen >= rank:
            return value
    return 0  # pragma: no cover


def summary(s: SchedulerState) -> dict[str, Any]:
    steps = s.total_steps
    out: dict[str, Any] = {
        "engine": "vllm-v1",
        "policy": s.cfg.policy,
        "prefix_cache": {
            "enabled": s.prefix_caching,
            "hit_tokens": s.total_hit_tokens,
            "queried_tokens": s.total_query_tokens,
            "hit_rate": round(s.total_hit_tokens / s.total_query_tokens, 6) if s.total_query_tokens else 0.0,
            "first_admission_hit_tokens": s.total_first_hit_tokens,
            "first_admission_hit_rate": round(s.total_first_hit_tokens / s.total_first_query_tokens, 6)
            if s.total_first_query_tokens
            else 0.0,
        },
        "admissions": s.total_admissions,
        "preemptions": s.total_preemptions,
        "scheduled_tokens": {
            "total": s.total_sched_tokens,
            "steps": steps,
            "mean_per_step": round(s.total_sched_tokens / steps, 6) if steps else 0.0,
            "p50_per_step": _hist_percentile(s.tokens_hist, steps, 50) if steps else 0,
            "p99_per_step": _hist_percentile(s.tokens_hist, steps, 99) if steps else 0,
            "max_per_step": max(s.tokens_hist) if s.tokens_hist else 0,
        },
        "kv_blocks": {
            "usable": s.pool.usable,
            "peak_after_schedule": s.kv_peak,
            "mean_after_schedule": round(s.kv_blocks_sum / steps, 6) if steps else 0.0,
        },
    }
    if s.transferred_requests:  # disaggregated decode side (absent otherwise: reports stay as they were)
        out["transferred"] = {
            "requests": s.transferred_requests,
            "tokens": s.transferred_tokens,
            "local_hit_tokens": s.transferred_hit_tokens,
        }
    if s.spec is not None:  # speculative decoding (absent otherwise: reports stay as they were)
        out["speculative"] = s.spec.summary()
    if s.offload is not None:  # CPU KV offload (absent otherwise: reports stay as they were)
        out["kv_offload"] = s.offload.summary(s.total_first_query_tokens, s.total_first_hit_tokens)
    if s.kv_capacity is not None:  # num_gpu_blocks: auto (absent otherwise: reports stay as they were)
        out["kv_capacity"] = s.kv_capacity
    return out
