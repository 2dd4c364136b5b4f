"""Helpers the built-in signals share: option schemas, id lists, wording."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...interfaces.gate import SignalResult

#: how many request ids a result lists (the counts are always complete)
ID_LIMIT = 20

DEFAULT_SEGMENT_KEYS = ["backend", "model", "accelerator"]

FRACTION = {"type": "number", "minimum": 0, "maximum": 1}
SEGMENT_KEYS = {"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": True}


def schema(properties: Mapping[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": dict(properties)}
    if required:
        out["required"] = list(required)
    return out


def ids(values: Iterable[str], limit: int = ID_LIMIT) -> list[str]:
    """The first ``limit`` ids in sorted order (sorted: output must not depend on input order)."""
    return sorted(values)[:limit]


def id_text(values: list[str], total: int) -> str:
    shown = ", ".join(values)
    return shown + (f" (+{total - len(values)} more)" if total > len(values) else "")


def pct(x: float) -> str:
    return f"{x * 100:.2f}%"


def aggregate_count(aggregates: Mapping[str, Any]) -> int:
    """Requests a run's aggregates account for (completed, else request_count; 0 when neither)."""
    for key in ("completed", "request_count"):
        value = aggregates.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def no_join(reason: str) -> SignalResult:
    """Aggregate-only runs: this signal needs per-request pairs."""
    return SignalResult(
        status="hold",
        reason="missing_evidence",
        message=f"no per-request join was possible (aggregate-only observations): {reason}",
        next_action="capture per-request observations (request_id on both sides) so they can be joined",
        evidence={"matched": 0},
    )


def not_recorded(what: str, **figures: Any) -> SignalResult:
    """Neither side recorded ``what`` for any request: nothing to judge.

    Reported as not evaluated (it does not decide unless the policy marks the
    signal ``required``). Evidence on one side only is a hold, never this."""
    return SignalResult(
        status="not_evaluated",
        reason="not_recorded",
        message=f"neither side records {what}",
        next_action=f"record {what} on both sides, or mark the signal required: true to hold without it",
        **figures,
    )
