"""A report's ``cost`` section (docs/report.md, "Cost").

Rounding: GPU-hours, USD and USD per million tokens are rounded to 6 decimal places (a
micro-dollar: a short replay costs cents) once, from exact sums (:func:`math.fsum` over the
records sorted by pool, replica and start): the figures do not depend on the order the records
came in. A pool's USD per million tokens is its dollars over the whole replay's tokens (a
prefill pool makes no output tokens of its own), so the pools' figures add up to the total's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .prices import PriceTable
from .shape import pool_shapes
from .usage import ReplicaUsage, UsageSink, static_usage

__all__ = ["ROUNDING", "check_priced", "cost_section", "recorded_usage", "replay_cost"]

DIGITS = 6
ROUNDING = (
    "GPU-hours, USD and USD per million tokens rounded to 6 decimal places from exact sums "
    "over the replicas sorted by pool, replica and start"
)
_MS_PER_HOUR = 3_600_000.0


def cost_section(
    usage: Sequence[ReplicaUsage], prices: PriceTable | None, output_tokens: int, total_tokens: int
) -> dict[str, Any]:
    """GPU-hours and, with ``prices``, USD: in all, per million output tokens and per million
    tokens (prompt and output) served, and the same per pool. Without ``prices`` the section
    has GPU-hours only and ``priced: false``. A GPU kind the table has no price for is an error
    naming the GPU and the table."""
    records = sorted(usage, key=lambda u: (u.pool, u.replica, u.start_ms, u.stop_ms))
    by_pool: dict[str, list[ReplicaUsage]] = {}
    for u in records:
        by_pool.setdefault(u.pool, []).append(u)
    rates: dict[str, float] = {}
    if prices is not None:
        for u in records:
            if u.gpu not in rates:
                rates[u.gpu] = prices.price(u.gpu, f"pool {u.pool!r} (replica {u.replica})")

    def figures(rows: Sequence[ReplicaUsage]) -> dict[str, Any]:
        hours = math.fsum(u.gpu_ms for u in rows) / _MS_PER_HOUR
        out: dict[str, Any] = {"gpu_hours": round(hours, DIGITS)}
        if prices is not None:
            usd = math.fsum(u.gpu_ms * rates[u.gpu] for u in rows) / _MS_PER_HOUR
            out["usd"] = round(usd, DIGITS)
            out["usd_per_million_output_tokens"] = _per_million(usd, output_tokens)
            out["usd_per_million_total_tokens"] = _per_million(usd, total_tokens)
        return out

    section: dict[str, Any] = {"priced": prices is not None, **figures(records)}
    section["output_tokens"] = output_tokens
    section["total_tokens"] = total_tokens
    if prices is not None:
        section["currency"] = prices.currency
        section["usd_per_gpu_hour"] = {
            (prices.key(gpu) if gpu else gpu): rate for gpu, rate in sorted(rates.items())
        }
        section["prices"] = prices.describe()
    section["pools"] = {
        pool: {
            "replicas": len({u.replica for u in rows}),
            "gpu": sorted({(prices.key(u.gpu) if prices is not None else u.gpu) for u in rows}),
            **figures(rows),
        }
        for pool, rows in sorted(by_pool.items())
    }
    section["rounding"] = ROUNDING
    return section


def _per_million(usd: float, tokens: int) -> float | None:
    """USD per million tokens; None when no token was served (nothing to divide by)."""
    return round(usd * 1_000_000 / tokens, DIGITS) if tokens else None


def recorded_usage(report: Mapping[str, Any], document: Mapping[str, Any]) -> list[ReplicaUsage] | None:
    """The usage a fleet that scales recorded: every replica of its report's ``autoscaling``
    section from ``start_s`` (asked for: provisioning is billed) to ``stop_s`` (stopped, or the
    replay's end), with its pool's GPU kind and GPUs per replica from the policy ``document``;
    None for a fleet that does not scale (or a single engine)."""
    scaling = report.get("autoscaling")
    if not isinstance(scaling, Mapping):
        return None
    shapes = {shape.pool: shape for shape in pool_shapes(document)}
    usage = []
    for r in scaling["replicas"]:
        shape = shapes[r["pool"]]
        usage.append(
            ReplicaUsage(
                pool=shape.pool,
                replica=str(r["replica"]),
                gpu=shape.gpu or "",
                gpus=shape.gpus_per_replica,
                start_ms=float(r["start_s"]) * 1000.0,
                stop_ms=float(r["stop_s"]) * 1000.0,
            )
        )
    return usage


def replay_cost(
    report: Mapping[str, Any], document: Mapping[str, Any], prices: PriceTable | None, sink: UsageSink
) -> dict[str, Any]:
    """A replay's ``cost`` section: the usage a fleet that scales recorded (:func:`recorded_usage`)
    or, without it, every replica of the policy ``document`` from 0 to the replay's end
    (:func:`~tickgate.cost.usage.static_usage`); ``usage`` says which."""
    sink.check_timed()
    recorded = recorded_usage(report, document)
    usage = recorded if recorded is not None else static_usage(document, sink.end_ms)
    section = {"usage": "recorded" if recorded is not None else "static"}
    section.update(cost_section(usage, prices, sink.output_tokens, sink.total_tokens))
    return section


def check_priced(document: Mapping[str, Any], prices: PriceTable) -> None:
    """Every pool of ``document`` has a GPU kind the table prices: checked before a replay runs
    (an error after it would throw the replay away)."""
    for shape in pool_shapes(document):
        prices.price(shape.gpu, f"pool {shape.pool!r}")
