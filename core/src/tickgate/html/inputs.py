"""What ``tickgate report`` reads: a replay report (a fleet replay's has a
``fleet`` block too), a gate report, or a sweep (its output directory or its
``results.jsonl``), told apart by their shape, and checked for the fields the
pictures use, so a bad file is one located error (file, line, JSON path,
what was expected) before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..util.errors import InputError
from ..util.locations import parse_json, read_text

#: reports are tickgate's own output: as large as a replay with a large --detail-limit makes them
MAX_REPORT_BYTES = 1 << 30
GATE_KIND = "tickgate.gate-report"
RESULTS = "results.jsonl"  # tickgate.sweep.run.RESULTS (not imported: it pulls in the sweep runner)

#: the headline metrics of results.jsonl a sweep page shows (tickgate.sweep.headline.metrics)
SWEEP_METRICS = (
    "completed",
    "rejected",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_p99",
    "e2e_ms_p99",
    "output_tokens_per_s",
    "requests_per_s",
)

#: the latency block's single figures the summary table shows (views._throughput_rows)
LATENCY_FIGURES = (
    "busy_ms",
    "benchmark_duration_ms",
    "output_tokens_per_s",
    "requests_per_s",
    "busy_output_tokens_per_s",
)

#: the cost block's figures (the whole run's and each pool's) the cost table shows first
COST_FIGURES = (
    "gpu_hours",
    "usd",
    "usd_per_million_output_tokens",
    "usd_per_million_total_tokens",
    "usd_per_million_tokens",
)
#: an autoscaled fleet's timeline and lifecycle fields the page draws (tickgate.fleet.scaling)
TIMELINE_FIELDS = (
    ("t_s", "number"),
    ("pool", "string"),
    ("ready", "integer"),
    ("starting", "integer"),
    ("draining", "integer"),
    ("desired", "integer"),
    ("arrival_rate", "number"),
    ("ttft_p99_ms", "number?"),
    ("itl_p99_ms", "number?"),
)
LIFE_FIELDS = (
    ("replica", "string"),
    ("pool", "string"),
    ("start_s", "number"),
    ("ready_s", "number?"),
    ("drain_s", "number?"),
    ("stop_s", "number"),
)
EVENT_FIELDS = (
    ("t_s", "number"),
    ("pool", "string"),
    ("replica", "string"),
    ("action", "string"),
    ("reason", "string"),
)

_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "true or false",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def _kind_of(value: Any) -> str:
    return _NAMES.get(type(value), type(value).__name__)


class Doc:
    """Typed access to one JSON document, every failure located at its JSON path."""

    def __init__(self, path: Path, line: int | None = None) -> None:
        self.path, self.line = path, line

    def fail(self, where: str, message: str) -> InputError:
        return InputError(self.path, message, line=self.line, json_path=where)

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, not {_kind_of(value)}")
        return value

    def get(self, parent: dict[str, Any], key: str, where: str, kind: str, *, optional: bool = False) -> Any:
        """``parent[key]`` checked as ``kind``: object, array, string, number, integer,
        number-or-null; a missing key is an error unless ``optional`` (then None)."""
        at = f"{where}.{key}"
        if key not in parent:
            if optional:
                return None
            raise self.fail(at, f"missing (expected {_expected(kind)})")
        value = parent[key]
        if kind.endswith("?") and value is None:
            return None
        ok = {
            "object": isinstance(value, dict),
            "array": isinstance(value, list),
            "string": isinstance(value, str),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
            "integer": isinstance(value, int) and not isinstance(value, bool),
        }[kind.rstrip("?")]
        if not ok:
            raise self.fail(at, f"expected {_expected(kind)}, not {_kind_of(value)}")
        return value


def _expected(kind: str) -> str:
    base = kind.rstrip("?")
    text = {
        "object": "an object",
        "array": "an array",
        "string": "a string",
        "number": "a number",
        "integer": "an integer",
    }[base]
    return text + " or null" if kind.endswith("?") else text


def load(path: Path) -> tuple[str, Any]:
    """``(kind, data)``: ``replay``, ``fleet``, ``gate`` or ``sweep`` (data: the rows)."""
    if path.is_dir():
        results = path / RESULTS
        if not results.is_file():
            raise InputError(
                path,
                f"a directory, but not a sweep's output: it has no {RESULTS} "
                "(give a replay or gate report, a sweep directory or its results.jsonl)",
            )
        return "sweep", load_results(results)
    if path.suffix == ".jsonl":
        return "sweep", load_results(path)
    if not path.exists():
        raise InputError(path, "no such file")
    data = parse_json(read_text(path, limit=MAX_REPORT_BYTES), path)  # a pipe too: read once, bounded
    doc = Doc(path)
    report = doc.obj(data, "$")
    if report.get("kind") == GATE_KIND:
        check_gate(doc, report)
        return "gate", report
    if "summary" in report:
        check_replay(doc, report)
        return ("fleet" if "fleet" in report else "replay"), report
    raise doc.fail(
        "$",
        'not a report tickgate knows: expected a replay report (with "summary"), a gate '
        f'report ("kind": "{GATE_KIND}") or a sweep\'s {RESULTS}',
    )


def check_replay(doc: Doc, report: dict[str, Any]) -> None:
    summary = doc.get(report, "summary", "$", "object")
    for key in ("request_count", "completed_requests", "total_ticks", "peak_kv_pages"):
        doc.get(summary, key, "$.summary", "integer")
    doc.get(summary, "trace_fingerprint", "$.summary", "string")
    latency = doc.get(report, "latency", "$", "object", optional=True)
    if latency is not None:
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms"):
            block = doc.get(latency, key, "$.latency", "object?", optional=True)
            if block is not None:
                for q in ("count", "mean", "p50", "p90", "p95", "p99", "max"):
                    doc.get(block, q, f"$.latency.{key}", "number")
        for key in LATENCY_FIGURES:
            doc.get(latency, key, "$.latency", "number?", optional=True)
    series = doc.get(report, "series", "$", "object", optional=True)
    if series is not None:
        check_series(doc, series)
    else:
        ticks = doc.get(report, "ticks", "$", "array", optional=True) or []
        for i, tick in enumerate(ticks):
            t = doc.obj(tick, f"$.ticks[{i}]")
            for key in ("tick", "span", "kv_pages_used", "queued", "active"):
                doc.get(t, key, f"$.ticks[{i}]", "integer")
    fleet = doc.get(report, "fleet", "$", "object", optional=True)
    if fleet is not None:
        check_fleet(doc, fleet)
    scaling = doc.get(report, "autoscaling", "$", "object", optional=True)
    if scaling is not None:
        check_autoscaling(doc, scaling)
    cost = doc.get(report, "cost", "$", "object", optional=True)
    if cost is not None:
        check_cost(doc, cost)


def check_series(doc: Doc, series: dict[str, Any], at: str = "$.series") -> None:
    n = doc.get(series, "points", at, "integer")
    columns = [("tick", doc.get(series, "tick", at, "array"), f"{at}.tick")]
    ms = doc.get(series, "ms", at, "array", optional=True)
    if ms is not None:
        columns.append(("ms", ms, f"{at}.ms"))
    for name in ("kv_pages_used", "queued", "active"):
        block = doc.get(series, name, at, "object")
        for agg in ("max", "mean"):
            columns.append((name, doc.get(block, agg, f"{at}.{name}", "array"), f"{at}.{name}.{agg}"))
    for _, values, where in columns:
        if len(values) != n:
            raise doc.fail(where, f"expected {n} entries (series.points), not {len(values)}")
        for i, v in enumerate(values):
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise doc.fail(f"{where}[{i}]", f"expected a number, not {_kind_of(v)}")


def check_fleet(doc: Doc, fleet: dict[str, Any]) -> None:
    replicas = doc.get(fleet, "replicas", "$.fleet", "array")
    for i, rep in enumerate(replicas):
        where = f"$.fleet.replicas[{i}]"
        r = doc.obj(rep, where)
        doc.get(r, "name", where, "string")
        doc.get(r, "pool", where, "string", optional=True)
        for key in ("routed", "completed"):
            doc.get(r, key, where, "integer")
        doc.get(r, "busy_ms", where, "number?")
        doc.get(r, "prefix_cache_hit_rate", where, "number?", optional=True)
        doc.get(r, "summary", where, "object", optional=True)
        series = doc.get(r, "series", where, "object", optional=True)
        if series is not None:
            check_series(doc, series, f"{where}.series")
    doc.get(fleet, "prefix_cache_hit_rate", "$.fleet", "number?", optional=True)
    routing = doc.get(fleet, "routing", "$.fleet", "object", optional=True)
    if routing is not None:
        decisions = doc.get(routing, "decisions", "$.fleet.routing", "object", optional=True) or {}
        for name in decisions:
            doc.get(decisions, name, "$.fleet.routing.decisions", "integer")
        doc.get(routing, "jain_index", "$.fleet.routing", "number?", optional=True)
    transfers = doc.get(fleet, "transfers", "$.fleet", "object?", optional=True)
    if transfers is not None:
        doc.get(transfers, "count", "$.fleet.transfers", "integer")
        doc.get(transfers, "bytes", "$.fleet.transfers", "number")
        ms = doc.get(transfers, "ms", "$.fleet.transfers", "object?", optional=True)
        for key in ms or {}:
            doc.get(ms, key, "$.fleet.transfers.ms", "number?")


def check_autoscaling(doc: Doc, scaling: dict[str, Any], at: str = "$.autoscaling") -> None:
    doc.get(scaling, "name", at, "string")
    doc.get(scaling, "options", at, "object")
    for key in ("interval_s", "window_s", "end_s"):
        doc.get(scaling, key, at, "number")
    bounds = doc.get(scaling, "bounds", at, "object")
    for pool in bounds:
        block = doc.get(bounds, pool, f"{at}.bounds", "object")
        for key in ("min_replicas", "max_replicas"):
            doc.get(block, key, f"{at}.bounds.{pool}", "integer")
    life = doc.get(scaling, "lifecycle", at, "object")
    for key in ("provisioning_s", "load_s", "warmup_s"):
        doc.get(life, key, f"{at}.lifecycle", "number")
    doc.get(life, "load_source", f"{at}.lifecycle", "string?", optional=True)
    peaks = doc.get(scaling, "peak_replicas", at, "object")
    for pool in peaks:
        doc.get(peaks, pool, f"{at}.peak_replicas", "integer")
    for name, fields in (("replicas", LIFE_FIELDS), ("events", EVENT_FIELDS), ("timeline", TIMELINE_FIELDS)):
        for i, item in enumerate(doc.get(scaling, name, at, "array")):
            where = f"{at}.{name}[{i}]"
            row = doc.obj(item, where)
            for key, kind in fields:
                doc.get(row, key, where, kind)
            if name == "events":
                doc.get(row, "metric", where, "string?", optional=True)
                doc.get(row, "value", where, "number?", optional=True)


def check_cost(doc: Doc, cost: dict[str, Any], at: str = "$.cost") -> None:
    """The known figures are numbers (or null); ``pools`` maps names to blocks of the same."""
    for key in COST_FIGURES:
        doc.get(cost, key, at, "number?", optional=True)
    pools = doc.get(cost, "pools", at, "object", optional=True) or {}
    for name in pools:
        block = doc.get(pools, name, f"{at}.pools", "object")
        for key in COST_FIGURES:
            doc.get(block, key, f"{at}.pools.{name}", "number?", optional=True)


def check_gate(doc: Doc, report: dict[str, Any]) -> None:
    doc.get(report, "decision", "$", "string")
    doc.get(report, "summary", "$", "string", optional=True)
    signals = doc.get(report, "signals", "$", "array")
    for i, sig in enumerate(signals):
        where = f"$.signals[{i}]"
        s = doc.obj(sig, where)
        doc.get(s, "signal", where, "string")
        doc.get(s, "status", where, "string")
        for key in ("delta", "threshold", "baseline", "candidate"):
            doc.get(s, key, where, "number?", optional=True)
        doc.get(s, "unit", where, "string?", optional=True)
        ci = doc.get(s, "confidence_interval", where, "array?", optional=True)
        if ci is not None and (
            len(ci) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ci)
        ):
            raise doc.fail(f"{where}.confidence_interval", "expected [low, high] (two numbers)")


def load_results(path: Path) -> list[dict[str, Any]]:
    """A sweep's ``results.jsonl``: one object per line (docs/sweep.md)."""
    if not path.exists():
        raise InputError(path, "no such file")
    text = read_text(path, limit=MAX_REPORT_BYTES)
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        doc = Doc(path, number)
        row = doc.obj(parse_json(line, path, line_offset=number - 1), "$")
        doc.get(row, "id", "$", "string")
        doc.get(row, "params", "$", "object")
        if "error" in row:
            doc.get(row, "error", "$", "string")
        else:
            metrics = doc.get(row, "metrics", "$", "object")
            for key in SWEEP_METRICS:  # the ones drawn; others a sweep may add are not looked at
                doc.get(metrics, key, "$.metrics", "number?", optional=True)
        rows.append(row)
    if not rows:
        raise InputError(path, "no sweep points (an empty results.jsonl)")
    return rows
