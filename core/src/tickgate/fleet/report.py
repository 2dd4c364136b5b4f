"""A fleet replay's report (docs/report.md, "Fleets").

Each engine (replica or data-parallel rank) gets the report a plain replay of
what it received would give (same sinks, same figures: ``Fleet.replica_reports``);
the fleet's own report is what a client sees (latency from every request's
arrival at the fleet to its last token, throughput over the client's window,
from the first arrival at the fleet to the last completion, as
:mod:`tickgate.replay.report` defines it; ``busy_ms`` the time any replica was
stepping, ``busy_output_tokens_per_s`` over it) plus the ``fleet`` block: one entry per engine, the fleet's prefix-cache
hit rate, the routing decisions and how evenly they spread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from ..replay.report import SummarySink
from ..replay.token_gaps import weighted_distribution
from .driver import Fleet

__all__ = ["fleet_report", "jain_index", "replica_report"]


def jain_index(values: list[float]) -> float:
    """Jain's fairness index, ``(sum x)^2 / (n * sum x^2)``: 1 when all are equal, 1/n
    when one replica has everything (the index BLIS reports, here over replicas)."""
    square = sum(v * v for v in values)
    if not values or not square:
        return 1.0
    total = sum(values)
    return round(total * total / (len(values) * square), 6)


def replica_report(fleet: Fleet, index: int, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The report of one engine (after :meth:`Engine.finish`), built exactly as
    :func:`tickgate.replay.run.replay_engine` builds one."""
    e = fleet.engines[index]
    s = e.scheduler
    timing = fleet.timing
    summary, digest = e.summary, e.digest
    assert summary is not None and digest is not None  # set by Engine.finish
    return summary.report(
        total_ticks=e.clock.tick,
        kv_capacity=s.kv_capacity_pages(),
        decode_slots=s.decode_slots_per_tick(),
        final_kv=s.kv_used_pages(),
        fingerprint=digest,
        extra=s.extra_summary(),
        built=e.built,
        inputs=dict(inputs),
        timed=True,
        busy_ms=e.clock.now_ms - e.clock.idle_ms,
        frontend_ms=timing.frontend_ms if timing is not None else 0.0,
    )


def fleet_report(
    fleet: Fleet, client: SummarySink, inputs: dict[str, Any], replicas: list[dict[str, Any]]
) -> dict[str, Any]:
    """The fleet's report; ``client`` saw every request arrive and finish, ``replicas``
    are the engines' own reports (:func:`replica_report`, in fleet order)."""
    digest = hashlib.sha256(fleet.decisions.digest())
    for e, rep in zip(fleet.engines, replicas):
        digest.update(f"{e.name}\t{rep['summary']['trace_fingerprint']}\n".encode())
    fingerprint = digest.hexdigest()[:16]
    timing = fleet.timing
    sums = {
        key: sum(r["summary"][key] for r in replicas)
        for key in ("total_ticks", "total_decode_tokens", "final_kv_pages")
    }
    report = client.report(
        total_ticks=sums["total_ticks"],
        kv_capacity=sum(e.scheduler.kv_capacity_pages() for e in fleet.engines),
        decode_slots=0,
        final_kv=sums["final_kv_pages"],
        fingerprint=fingerprint,
        extra={},
        built=_plugins(fleet),
        inputs=inputs,
        timed=True,
        busy_ms=fleet.busy_ms,
        frontend_ms=timing.frontend_ms if timing is not None else 0.0,
    )
    summary = report["summary"]
    summary["total_decode_tokens"] = sums["total_decode_tokens"]
    summary["replicas"] = len(fleet.targets)
    summary["engines"] = len(fleet.engines)
    for key in ("total_reserved_kv_pages", "peak_kv_pressure_pct", "decode_capacity_utilization"):
        summary.pop(key, None)
    summary["peak_kv_pages"] = max(r["summary"]["peak_kv_pages"] for r in replicas)  # the fullest engine's
    # pressure and utilisation are per engine (a fleet-wide peak of different engines' steps means nothing)
    report.pop("pressure", None)
    report.pop("utilization", None)
    report.pop("ticks", None)
    report.pop("series", None)  # steps are per engine: each one's is in fleet.replicas
    report["requests"]["preemptions"] = sum(r["requests"]["preemptions"] for r in replicas)
    report["latency"]["itl_ms"] = _merged_gaps(fleet)
    report["fleet"] = _fleet_block(fleet, replicas, summary["total_prompt_tokens"])
    return report


def _merged_gaps(fleet: Fleet) -> dict[str, Any] | None:
    bins: dict[float, int] = {}
    total = 0.0
    top = 0.0
    for e in fleet.engines:
        assert e.summary is not None  # set by Engine.finish
        g = e.summary.gaps
        for gap, n in g.bins.items():
            bins[gap] = bins.get(gap, 0) + n
        total += g.total
        top = max(top, g.top)
    return weighted_distribution(bins, 3, total=total, top=top)


def _fleet_block(fleet: Fleet, replicas: list[dict[str, Any]], prompt_tokens: int) -> dict[str, Any]:
    entries = []
    hits = 0
    for e, rep in zip(fleet.engines, replicas):
        hit = e.hit_tokens() if e.hit_tokens is not None else 0
        hits += hit
        prompt = rep["summary"]["total_prompt_tokens"]
        entry = {
            "name": e.name,
            "pool": e.pool,
            "rank": e.rank,
            "routed": e.routed,
            "completed": rep["summary"]["completed_requests"],
            "busy_ms": rep["latency"]["busy_ms"],
            "prefix_cache_hit_rate": round(hit / prompt, 6) if prompt else 0.0,
            "summary": rep["summary"],
            "latency": {k: rep["latency"][k] for k in ("ttft_ms", "itl_ms", "e2e_ms")},
        }
        if "series" in rep:
            entry["series"] = rep["series"]
        transferred = rep.get("scheduler", {}).get("transferred")
        if transferred is not None:  # a disaggregated decode side: what arrived by transfer
            entry["transferred"] = transferred
        entries.append(entry)
    decisions = {t.name: fleet.decision_counts[i] for i, t in enumerate(fleet.targets)}
    block: dict[str, Any] = {
        "replicas": entries,
        "prefix_cache_hit_rate": round(hits / prompt_tokens, 6) if prompt_tokens else 0.0,
        "routing": {
            "router": fleet.entry_pool.router.plugin.name,
            "decisions": decisions,
            "jain_index": jain_index([float(v) for v in decisions.values()]),
        },
    }
    if fleet.handoff is not None:
        # each side's decisions and evenness: a request is routed once on either side
        for side, targets, pool in (
            ("prefill", fleet.entry_targets, fleet.entry_pool),
            ("decode", fleet.decode_targets, fleet.decode_pool),
        ):
            counts = [decisions[t.name] for t in targets]
            block["routing"][side] = {
                "router": pool.router.plugin.name,
                "jain_index": jain_index([float(c) for c in counts]),
            }
        # the decode side's spread is the fleet's (its prefill side is given too)
        block["routing"]["jain_index"] = block["routing"]["decode"]["jain_index"]
        block["transfers"] = fleet.handoff.to_json()
    return block


def _plugins(fleet: Fleet) -> dict[str, Any]:
    """The report's ``plugins``: the first engine's (every pool's scheduler is in ``inputs.cluster``)."""
    out = dict(fleet.engines[0].built)
    out["router"] = {
        "name": fleet.entry_pool.router.plugin.name,
        "options": dict(fleet.entry_pool.router.options),
    }
    return out
