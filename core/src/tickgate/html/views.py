"""The sections of each kind of page: what a replay, a fleet replay, a gate and
a sweep show (docs/html.md). Inputs are checked before (:mod:`.inputs`); here
they are read."""

from __future__ import annotations

from typing import Any

from ..util.words import plural
from . import charts
from .inputs import SWEEP_METRICS
from .page import Section, Table

LATENCY_CHARTED = (("ttft_ms", "TTFT"), ("itl_ms", "inter-token"), ("e2e_ms", "end-to-end"))
LATENCY_ALL = (
    ("ttft_ms", "TTFT"),
    ("tpot_ms", "TPOT"),
    ("itl_ms", "inter-token (ITL)"),
    ("e2e_ms", "end-to-end"),
    ("queue_ms", "queue wait"),
)
QUANTILES = ("count", "mean", "p50", "p90", "p95", "p99", "max")


def replay_sections(report: dict[str, Any]) -> list[Section]:
    s, req = report["summary"], report.get("requests") or {}
    lat = report.get("latency") or {}
    pressure = report.get("pressure") or {}
    rows = [
        ["requests", s["request_count"]],
        ["completed", s["completed_requests"]],
        ["rejected", req.get("rejected")],
        ["preemptions", req.get("preemptions")],
        ["steps (total_ticks)", s["total_ticks"]],
        ["peak KV pages", s["peak_kv_pages"]],
        ["peak KV pressure %", s.get("peak_kv_pressure_pct")],
        ["KV capacity (pages)", (pressure.get("kv") or {}).get("capacity_pages")],
        ["peak queue", (pressure.get("queue") or {}).get("peak")],
        ["peak running batch", (pressure.get("active") or {}).get("peak")],
        ["decode capacity utilisation", s.get("decode_capacity_utilization")],
    ]
    if lat:
        rows += _throughput_rows(lat)
    rows.append(["trace fingerprint", s["trace_fingerprint"]])
    summary = Section("Summary", tables=[Table("Summary", ["figure", "value"], rows)])
    return [summary, _over_time(report), _latency(lat, req)]


def _throughput_rows(lat: dict[str, Any]) -> list[list[Any]]:
    """Throughput as a benchmark client computes it, over the benchmark's duration
    (docs/report.md, "Latency"), then the engine's rate per busy second, named as
    such; a report written before the window has per-busy-second figures only."""
    if "benchmark_duration_ms" not in lat:
        return [
            ["busy ms", lat.get("busy_ms")],
            ["output tokens per busy second", lat.get("output_tokens_per_s")],
            ["requests per busy second", lat.get("requests_per_s")],
        ]
    return [
        ["benchmark duration ms (first send to last completion)", lat.get("benchmark_duration_ms")],
        ["output tokens/s", lat.get("output_tokens_per_s")],
        ["requests/s", lat.get("requests_per_s")],
        ["busy ms", lat.get("busy_ms")],
        ["output tokens per busy second", lat.get("busy_output_tokens_per_s")],
    ]


def _over_time(report: dict[str, Any], title: str = "Over time") -> Section:
    section = Section(title)
    series = report.get("series")
    names = ("kv_pages_used", "queued", "active")
    if series is not None:
        if "ms" in series:
            xs, x_title = [m / 1000.0 for m in series["ms"]], "time (s)"
        else:
            xs, x_title = [float(t) for t in series["tick"]], "step"
        cols = {name: {"max": series[name]["max"], "mean": series[name]["mean"]} for name in names}
        section.notes.append(
            f"{series['points']} buckets of {series.get('bucket_steps', 1)} step(s) over "
            "the whole replay: the largest value in each bucket and the mean over its busy "
            'steps (docs/report.md, "Series").'
        )
    else:
        ticks = report.get("ticks") or []
        xs, x_title = [float(t["tick"]) for t in ticks], "step"
        cols = {name: {"value": [t[name] for t in ticks]} for name in names}
        omitted = report.get("ticks_omitted")
        section.notes.append(
            "This report has no series block (written before tickgate had one): the "
            f"first {len(ticks)} step records only" + (f", {omitted} more left out." if omitted else ".")
        )
    if not xs:
        section.notes.append("No steps ran: nothing to draw.")
        return section
    for name, title, unit in (
        ("kv_pages_used", "KV blocks in use", "pages"),
        ("queued", "Queue depth", "requests"),
        ("active", "Running batch", "requests"),
    ):
        section.charts.append((name, charts.render(charts.over_time(title, x_title, xs, cols[name], unit))))
    return section


def _latency(lat: dict[str, Any], req: dict[str, Any]) -> Section:
    section = Section("Latency")
    if not lat:
        section.notes.append("An untimed replay (the policy has no timing model): no latency in ms.")
        queue = req.get("queue_ticks")
        if isinstance(queue, dict):
            section.tables.append(
                Table("Queue time (steps)", list(QUANTILES), [[queue.get(q) for q in QUANTILES]])
            )
        return section
    blocks = {label: lat[key] for key, label in LATENCY_CHARTED if lat.get(key)}
    if blocks:
        section.charts.append(
            (
                "latency",
                charts.render(
                    charts.quantiles("TTFT, inter-token and end-to-end latency (whole replay)", blocks, "ms")
                ),
            )
        )
    rows = [[label] + [lat[key].get(q) for q in QUANTILES] for key, label in LATENCY_ALL if lat.get(key)]
    section.tables.append(Table("Latency distributions (ms)", ["distribution", *QUANTILES], rows))
    return section


#: replicas of a fleet drawn over time (each one's series; the table lists them all)
FLEET_SERIES = 8


def fleet_sections(report: dict[str, Any]) -> list[Section]:
    fleet = report["fleet"]
    replicas = fleet["replicas"]
    names = [r["name"] for r in replicas]
    section = Section("Fleet: per-replica load")
    routing = fleet.get("routing") or {}
    decisions = routing.get("decisions") or {}
    from ..fleet.spec import fleet_shape  # the fleet package only for a fleet's page

    pools = (report.get("inputs") or {}).get("cluster", {}).get("pools")
    facts = [fleet_shape(pools) if pools else plural(len(replicas), "replica")]
    if fleet.get("prefix_cache_hit_rate") is not None:
        facts.append(f"prefix-cache hit rate {fleet['prefix_cache_hit_rate']:.1%}")
    if routing.get("jain_index") is not None:
        facts.append(f"routing balance (Jain's index) {routing['jain_index']:.3f}")
    section.notes.append("; ".join(facts) + ".")
    if replicas:
        section.charts.append(
            (
                "fleet-requests",
                charts.render(
                    charts.grouped_bars(
                        "Requests per replica",
                        names,
                        {
                            "routed": [r["routed"] for r in replicas],
                            "completed": [r["completed"] for r in replicas],
                        },
                        "requests",
                    )
                ),
            )
        )
        section.charts.append(
            (
                "fleet-busy",
                charts.render(
                    charts.grouped_bars(
                        "Busy time per replica",
                        names,
                        {"busy ms": [r.get("busy_ms") or 0.0 for r in replicas]},
                        "ms",
                    )
                ),
            )
        )
    rows = []
    for r in replicas:
        summary = r.get("summary") or {}
        rows.append(
            [
                r["name"],
                r.get("pool"),
                r["routed"],
                r["completed"],
                r.get("busy_ms"),
                r.get("prefix_cache_hit_rate"),
                decisions.get(r["name"]),
                summary.get("peak_kv_pages"),
                summary.get("total_ticks"),
                summary.get("trace_fingerprint"),
            ]
        )
    section.tables.append(
        Table(
            "Replicas",
            [
                "replica",
                "pool",
                "routed",
                "completed",
                "busy ms",
                "prefix-cache hit rate",
                "routing decisions",
                "peak KV pages",
                "steps",
                "fingerprint",
            ],
            rows,
        )
    )
    transfers = fleet.get("transfers")
    if transfers:
        ms = transfers.get("ms") or {}
        keys = [k for k in ("count", "mean", "p50", "p90", "p95", "p99", "max") if k in ms]
        section.tables.append(
            Table(
                "KV transfers (prefill to decode)",
                ["transfers", "bytes", *(f"ms {k}" for k in keys)],
                [[transfers["count"], transfers["bytes"], *(ms[k] for k in keys)]],
            )
        )
    shown = [r for r in replicas if isinstance(r.get("series"), dict)][:FLEET_SERIES]
    over = [_over_time({"series": r["series"]}, f"Over time: {r['name']}") for r in shown]
    if len(shown) < len(replicas) and shown:
        over[-1].notes.append(f"The first {len(shown)} of {len(replicas)} replicas drawn over time.")
    return [section, *over]


#: docs/gate.md: promote, inconclusive, hold or rollback
_STATUS_CLASS = {"promote": "promote", "inconclusive": "inconclusive", "hold": "hold", "rollback": "rollback"}
_UNITS = {
    "relative": "relative change (candidate / baseline - 1)",
    "absolute": "absolute change",
    "fraction": "change in fraction",
}


def gate_sections(report: dict[str, Any]) -> list[Section]:
    decision = report["decision"]
    head = Section("Decision", badge=(_STATUS_CLASS.get(decision, "other"), decision))
    if report.get("summary"):
        head.notes.append(report["summary"])
    signals = report["signals"]
    section = Section("Signals")
    by_unit: dict[str, list[dict[str, Any]]] = {}
    for sig in signals:
        if sig.get("delta") is None:
            continue
        ci = sig.get("confidence_interval")
        by_unit.setdefault(sig.get("unit") or "value", []).append(
            {
                "signal": sig["signal"],
                "delta": sig["delta"],
                "status": sig["status"],
                "lo": ci[0] if ci else None,
                "hi": ci[1] if ci else None,
                "threshold": sig.get("threshold"),
            }
        )
    section.notes.append(
        "Each signal's delta (point), its confidence interval (bar) and its threshold "
        "(tick), grouped by unit."
    )
    for unit, points in by_unit.items():
        if unit == "requests":
            continue  # a count against a minimum (matched traffic): the table says it
        section.charts.append(
            (
                f"gate-{unit}",
                charts.render(
                    charts.intervals(f"Signals: {_UNITS.get(unit, unit)}", points, _UNITS.get(unit, unit))
                ),
            )
        )
    rows: list[list[Any]] = []
    for sig in signals:
        ci = sig.get("confidence_interval")
        rows.append(
            [
                sig["signal"],
                sig["status"],
                sig.get("baseline"),
                sig.get("candidate"),
                sig.get("delta"),
                f"{ci[0]:.6g} .. {ci[1]:.6g}" if ci else None,
                sig.get("confidence"),
                sig.get("threshold"),
                sig.get("unit"),
                sig.get("message"),
            ]
        )
    section.tables.append(
        Table(
            "Signals",
            [
                "signal",
                "status",
                "baseline",
                "candidate",
                "delta",
                "CI",
                "confidence",
                "threshold",
                "unit",
                "message",
            ],
            rows,
        )
    )
    skipped = [n for n in report.get("not_evaluated") or [] if isinstance(n, dict)]
    if skipped:
        section.tables.append(
            Table("Not evaluated", ["signal", "why"], [[n.get("signal"), n.get("message")] for n in skipped])
        )
    return [head, section]


def pareto_front(points: list[dict[str, Any]]) -> set[str]:
    """Ids of the points no other beats on both: lower p99 TTFT and higher throughput
    (ties: the same on one and at least as good on the other do not dominate)."""
    front: set[str] = set()
    for p in points:
        dominated = any(
            q["ttft"] <= p["ttft"]
            and q["throughput"] >= p["throughput"]
            and (q["ttft"] < p["ttft"] or q["throughput"] > p["throughput"])
            for q in points
        )
        if not dominated:
            front.add(p["id"])
    return front


def sweep_sections(rows: list[dict[str, Any]]) -> list[Section]:
    plotted = [
        {
            "id": r["id"],
            "ttft": r["metrics"]["ttft_ms_p99"],
            "throughput": r["metrics"]["output_tokens_per_s"],
        }
        for r in rows
        if "metrics" in r
        and r["metrics"].get("ttft_ms_p99") is not None
        and r["metrics"].get("output_tokens_per_s") is not None
    ]
    front = pareto_front(plotted)
    section = Section("Pareto front")
    failed = sum(1 for r in rows if "error" in r)
    section.notes.append(
        f"{len(rows)} points, {failed} failed; {len(front)} on the front (no other point "
        "has both a lower p99 TTFT and a higher output throughput)."
    )
    if plotted:
        together: dict[tuple[float, float], list[str]] = {}
        for p in plotted:
            together.setdefault((p["ttft"], p["throughput"]), []).append(p["id"])
        for p in plotted:
            p["front"] = "on the front" if p["id"] in front else "dominated"
            ids = together[(p["ttft"], p["throughput"])]
            p["label"] = ", ".join(ids) if ids[0] == p["id"] else ""  # points on one spot: one label
        section.charts.append(
            ("pareto", charts.render(charts.pareto("Output throughput against p99 TTFT", plotted)))
        )
    else:
        section.notes.append(
            "No point has both output_tokens_per_s and ttft_ms_p99 (an untimed policy?): no front to draw."
        )
    params = sorted({k for r in rows for k in r["params"]})
    metric_names = list(SWEEP_METRICS)
    workloads = sorted({str(r.get("workload")) for r in rows})
    one = len(workloads) == 1  # then said once, not on every row
    table_rows = []
    for r in rows:
        m = r.get("metrics") or {}
        table_rows.append(
            [
                r["id"],
                *([] if one else [r.get("workload")]),
                *(r["params"].get(k) for k in params),
                *(m.get(k) for k in metric_names),
                r["id"] in front,
                r.get("error"),
            ]
        )
    header = ["id", *([] if one else ["workload"]), *params, *metric_names, "on the front", "error"]
    table = Section("Points", tables=[Table("Points (results.jsonl)", header, table_rows)])
    if one:
        table.notes.append(f"Workload: {workloads[0]}")
    return [section, table]
