"""The sections of an autoscaled fleet replay (the report's ``autoscaling`` block,
tickgate.fleet.scaling) and of a report's ``cost`` block (docs/html.md).

One chart, one time axis: the arrival rate, each pool's replicas (ready,
starting, draining; the autoscaler's desired count over them) and the p99
TTFT and ITL, stacked, so a decision, the replicas it asked for, the time they
took to come up and what latency did meanwhile read as one vertical line.
Replica counts come from each replica's lifecycle (exact start, ready, drain
and stop times); the rate, the desired count and the latencies from the
timeline (one row per pool per decision: what the autoscaler saw, over its
trailing window). Inputs are checked before (:mod:`.inputs`).
"""

from __future__ import annotations

import json
from typing import Any

from . import charts
from .inputs import COST_FIGURES
from .page import Section, Table

#: events listed in full up to this many; beyond, the first and last EVENTS_END and a count of the rest
EVENTS_ALL = 60
EVENTS_END = 25


def autoscaling_sections(scaling: dict[str, Any]) -> list[Section]:
    timeline, lives = scaling["timeline"], scaling["replicas"]
    pools = _pools(scaling)
    end = max([float(scaling["end_s"]), *(r["t_s"] for r in timeline), *(r["stop_s"] for r in lives)])
    section = Section("Autoscaling")
    section.notes.append(
        f"Autoscaler {scaling['name']}: a decision every {_num(scaling['interval_s'])} s on signals "
        f"over the last {_num(scaling['window_s'])} s. Replicas from each one's lifecycle (blue: "
        "ready and routed to; orange: starting -- provisioning, loading, warming up; grey: draining); "
        "the dashed line is the count the autoscaler asked for. Rate and p99 latencies are what it saw "
        "at each decision, over its window (no point: nothing finished in the window)."
    )
    if pools and end > 0:
        section.charts.append(("autoscaling", charts.render(_timeline_chart(scaling, pools, end))))
    section.tables.append(_facts(scaling, pools))
    section.tables.append(_events(scaling["events"]))
    section.tables.append(_lives(lives))
    if len(scaling["events"]) > EVENTS_ALL:
        section.notes.append(
            f"Events: the first and last {EVENTS_END} of {len(scaling['events'])}; the report's "
            "autoscaling.events has them all."
        )
    return [section]


def _num(value: float) -> str:
    return f"{value:g}"


def _pools(scaling: dict[str, Any]) -> list[str]:
    """The pools in the order they first appear: bounds, then replicas and timeline."""
    seen: dict[str, None] = dict.fromkeys(scaling["bounds"])
    for row in (*scaling["replicas"], *scaling["timeline"]):
        seen.setdefault(row["pool"], None)
    return list(seen)


def _timeline_chart(scaling: dict[str, Any], pools: list[str], end: float) -> dict[str, Any]:
    timeline = scaling["timeline"]

    def rows(key: str) -> list[dict[str, Any]]:
        return [{"t": r["t_s"], "pool": r["pool"], "value": r[key]} for r in timeline]

    panels = [charts.pool_lines("Arrival rate", rows("arrival_rate"), pools, "requests/s")]
    for pool in pools:
        bands = _bands([r for r in scaling["replicas"] if r["pool"] == pool], end)
        desired = [{"t": r["t_s"], "n": r["desired"]} for r in timeline if r["pool"] == pool]
        if desired:
            desired.append({"t": end, "n": desired[-1]["n"]})  # the last request holds to the end
        title = "Replicas" if len(pools) == 1 else f"Replicas: {pool}"
        panels.append(charts.replica_bands(title, bands, desired))
    panels.append(charts.pool_lines("TTFT p99", rows("ttft_p99_ms"), pools, "ms"))
    panels.append(charts.pool_lines("ITL p99", rows("itl_p99_ms"), pools, "ms"))
    return charts.stacked_in_time("Autoscaling over time", end, panels)


def _bands(lives: list[dict[str, Any]], end: float) -> list[dict[str, Any]]:
    """How many of ``lives`` are ready, starting and draining from each change on."""
    spans: list[tuple[str, float, float]] = []
    for r in lives:
        ready, drain, stop = r["ready_s"], r["drain_s"], r["stop_s"]
        spans.append(("starting", r["start_s"], ready if ready is not None else stop))
        if ready is not None:
            spans.append(("ready", ready, drain if drain is not None else stop))
        if drain is not None:
            spans.append(("draining", drain, stop))
    times = sorted({0.0, end, *(t for _, a, b in spans for t in (a, b))})
    out = []
    for t in times:
        for order, (state, _) in enumerate(charts.REPLICA_STATES):
            n = sum(1 for s, a, b in spans if s == state and a <= t < b)
            out.append({"t": t, "state": state, "n": n, "order": order})
    return out


def _facts(scaling: dict[str, Any], pools: list[str]) -> Table:
    life = scaling["lifecycle"]
    startup = life["provisioning_s"] + life["load_s"] + life["warmup_s"]
    rows: list[list[Any]] = [
        ["autoscaler", scaling["name"]],
        ["options", json.dumps(scaling["options"], sort_keys=True)],
        ["decision interval (s)", scaling["interval_s"]],
        ["signal window (s)", scaling["window_s"]],
        ["provisioning (s)", life["provisioning_s"]],
        ["model load (s)", life["load_s"]],
    ]
    if life.get("load_source"):
        rows.append(["model load from", life["load_source"]])
    rows += [["warm-up (s)", life["warmup_s"]], ["start-up in all (s)", startup]]
    peaks = scaling["peak_replicas"]
    for pool in pools:
        bounds = scaling["bounds"].get(pool) or {}
        name = "" if len(pools) == 1 else f" ({pool})"
        rows.append(
            [f"replicas min..max{name}", f"{bounds.get('min_replicas')}..{bounds.get('max_replicas')}"]
        )
        rows.append([f"peak replicas up{name}", peaks.get(pool)])
    rows.append(["replicas started in all", len(scaling["replicas"])])
    rows.append(["replay ended at (s)", scaling["end_s"]])
    return Table("Autoscaler, bounds and replica lifecycle", ["fact", "value"], rows)


def _shown(items: list[Any]) -> tuple[list[Any], int]:
    """All of ``items`` when few, else the first and last EVENTS_END; and how many were left out."""
    if len(items) <= EVENTS_ALL:
        return items, 0
    return [*items[:EVENTS_END], None, *items[-EVENTS_END:]], len(items) - 2 * EVENTS_END


def _events(events: list[dict[str, Any]]) -> Table:
    shown, left_out = _shown(events)
    rows: list[list[Any]] = []
    for e in shown:
        if e is None:
            rows.append(["\u2026", None, None, f"{left_out} more events", None, None, None])
            continue
        rows.append(
            [e["t_s"], e["pool"], e["replica"], e["action"], e["reason"], e.get("metric"), e.get("value")]
        )
    header = ["time (s)", "pool", "replica", "action", "reason", "metric", "value"]
    return Table(f"Scaling events ({len(events)})", header, rows)


def _lives(lives: list[dict[str, Any]]) -> Table:
    shown, left_out = _shown(lives)
    rows: list[list[Any]] = []
    for r in shown:
        if r is None:
            rows.append(["\u2026", f"{left_out} more replicas", None, None, None, None])
            continue
        rows.append([r["replica"], r["pool"], r["start_s"], r["ready_s"], r["drain_s"], r["stop_s"]])
    header = ["replica", "pool", "start (s)", "ready (s)", "drain (s)", "stop (s)"]
    return Table("Replica lifecycles (up until stop or the replay's end)", header, rows)


def cost_section(cost: dict[str, Any]) -> Section:
    """The report's ``cost`` block (tickgate.cost.report) as a table: the whole run, then
    each pool, one column per figure any of them has (the known ones first, then any other
    number by name, then a pool's text, e.g. its GPU kinds); the block's other fields
    (currency, prices and their sources, rounding) as notes."""
    pools = cost.get("pools") or {}
    rows = [("all pools", cost), *((f"pool {name}", block) for name, block in pools.items())]
    numeric = {k for _, block in rows for k, v in block.items() if _is_number(v)}
    columns = [k for k in COST_FIGURES if k in numeric]
    columns += sorted(numeric - set(columns))
    texts = sorted({k for block in pools.values() for k, v in block.items() if _text(v) is not None})
    table = [
        [name, *(block.get(k) if _is_number(block.get(k)) else None for k in columns)]
        + [_text(block.get(k)) for k in texts]
        for name, block in rows
    ]
    header = ["of", *(k.replace("_", " ") for k in (*columns, *texts))]
    section = Section("Cost", tables=[Table("Cost", header, table)])
    for key, value in cost.items():
        if key == "pools" or _is_number(value):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k} {_text(v) if _text(v) is not None else v}" for k, v in value.items())
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        section.notes.append(f"{key.replace('_', ' ')}: {_text(value) or value}")
    return section


def _text(value: Any) -> str | None:
    """A string, or a list of them joined; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ", ".join(value)
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
