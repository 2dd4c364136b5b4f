"""Summary exports of NVIDIA's benchmark clients: genai-perf
``profile_export_genai_perf.{json,csv}`` and aiperf
``profile_export_aiperf.{json,csv}``.

Both write one object per metric, ``{"unit": "ms", "avg": ..., "p50": ...}``,
and CSV sections (``Metric,avg,min,max,...`` then ``Metric,Value``). The two
mirrors share this mapping and differ in how they recognise a file.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from ..util.errors import InputError
from .common import Fields, is_number, require_any_key

#: metric -> aggregate holding its distribution
DISTRIBUTIONS = {
    "request_latency": "latency_ms",
    "time_to_first_token": "ttft_ms",
    "inter_token_latency": "itl_ms",
    "time_per_output_token": "tpot_ms",
}
_STATS = {
    "avg": "mean",
    "min": "min",
    "max": "max",
    "std": "std",
    "p50": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
}
_TIME_SCALE = {"ms": 1.0, "sec": 1000.0, "s": 1000.0, "us": 0.001, "ns": 1e-6}
#: CSV row labels (lower case, unit stripped) -> metric key
CSV_LABELS = {
    "request latency": "request_latency",
    "time to first token": "time_to_first_token",
    "inter token latency": "inter_token_latency",
    "time per output token": "time_per_output_token",
    "benchmark duration": "benchmark_duration",
    "request throughput": "request_throughput",
    "request count": "request_count",
    "output token throughput": "output_token_throughput",
    "output sequence length": "output_sequence_length",
    "input sequence length": "input_sequence_length",
}


#: top-level keys of a summary JSON that the mapping reads: a summary needs at least one
SUMMARY_KEYS = (
    *DISTRIBUTIONS,
    "request_throughput",
    "output_token_throughput",
    "benchmark_duration",
    "request_count",
    "total_isl",
    "total_osl",
    "error_request_count",
    "error_summary",
    "output_sequence_length",
    "input_sequence_length",
)


def require_summary(f: Fields, fmt: str, what: str) -> None:
    """Reject a JSON object with none of the summary's metric keys (a forced
    ``--format`` on unrelated JSON must not become a run with no figures)."""
    require_any_key(f, fmt, SUMMARY_KEYS, expected=f"{what} with at least one of {', '.join(SUMMARY_KEYS)}")


def _time_scale(f: Fields, unit: str | None, key: str) -> float:
    if unit is None:
        return 1.0
    if unit not in _TIME_SCALE:
        raise f.fail(key + ".unit", f"expected a time unit ({', '.join(_TIME_SCALE)}), got {unit!r}")
    return _TIME_SCALE[unit]


def aggregates_from_json(f: Fields, notes: list[str]) -> dict[str, Any]:
    """Aggregates from a genai-perf/aiperf summary JSON object."""
    agg: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for metric, target in DISTRIBUTIONS.items():
        m = f.sub(metric)
        if m is None:
            continue
        scale = _time_scale(m, m.string("unit"), metric)
        pct: dict[str, float] = {}
        for key in sorted(m.obj):
            if key == "unit":
                continue
            value = m.number(key, minimum=None)
            if value is None:
                continue
            if key in _STATS:
                pct[_STATS[key]] = round(value * scale, 6)
            elif key.startswith("p"):
                extra[f"{target}.{key}"] = round(value * scale, 6)
        if "p50" in pct:
            pct["median"] = pct["p50"]
        if pct:
            agg[target] = pct
    simple = {"request_throughput": "request_throughput", "output_token_throughput": "output_throughput"}
    for metric, target in simple.items():
        m = f.sub(metric)
        if m is not None and m.number("avg") is not None:
            agg[target] = round(m.number("avg") or 0.0, 6)
    duration = f.sub("benchmark_duration")
    if duration is not None and duration.number("avg") is not None:
        agg["duration_s"] = round(
            (duration.number("avg") or 0.0)
            * _time_scale(duration, duration.string("unit"), "benchmark_duration")
            / 1000,
            6,
        )
    for metric, target in (
        ("request_count", "request_count"),
        ("total_isl", "total_input_tokens"),
        ("total_osl", "total_output_tokens"),
        ("error_request_count", "failed"),
    ):
        v = f.obj.get(metric)
        if isinstance(v, dict):
            v = Fields(v, f.path, prefix=f.where(metric), notes=notes).count("avg")
        elif v is not None:
            v = f.count(metric)
        if v is not None:
            agg[target] = v
    if "failed" not in agg:
        errors = f.array("error_summary")
        if errors is not None:
            total = 0
            for i, item in enumerate(errors):
                entry = Fields(item, f.path, prefix=f"{f.where('error_summary')}[{i}]", notes=notes)
                total += entry.count("count", required=True) or 0
            agg["failed"] = total
    if "failed" in agg and "request_count" in agg:
        attempted = agg["request_count"] + agg["failed"]
        if attempted:
            agg["error_rate"] = round(agg["failed"] / attempted, 6)
            notes.append("request_count counts valid requests; error_rate = failed / (valid + failed)")
    for metric in ("output_sequence_length", "input_sequence_length"):
        m = f.sub(metric)
        if m is not None and m.number("avg") is not None:
            extra[f"{metric}.mean"] = round(m.number("avg") or 0.0, 6)
    if extra:
        agg["extra"] = extra
    return agg


def parse_csv(text: str, path: Path | str, notes: list[str]) -> dict[str, Any]:
    """Aggregates from the CSV export: a statistics section and a value section."""
    lines = text.splitlines()
    stats_obj: dict[str, Any] = {}
    header: list[str] | None = None
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            header = None
            continue
        row = next(csv.reader(io.StringIO(raw)))
        if header is None:
            header = [c.strip() for c in row]
            if header[0] != "Metric":
                notes.append(
                    f"CSV section at line {lineno} ({header[0]},...) is not a client metric table; ignored"
                )
            elif header[1:2] != ["Value"] and "avg" not in header:
                raise InputError(path, "expected a header 'Metric,avg,...' or 'Metric,Value'", line=lineno)
            continue
        if header[0] != "Metric":
            continue
        if len(row) != len(header):
            raise InputError(path, f"row has {len(row)} cells, the header has {len(header)}", line=lineno)
        label, unit = _label(row[0])
        metric = CSV_LABELS.get(label)
        if metric is None:
            continue
        values: dict[str, Any] = {}
        if unit:
            values["unit"] = unit
        for col, (name, cell) in enumerate(zip(header[1:], row[1:]), start=2):
            cell = cell.strip()
            if cell in ("", "N/A"):
                continue
            try:
                number = float(cell.replace(",", ""))
            except ValueError:
                raise InputError(
                    path, f"{name} of {row[0]!r} is not a number: {cell!r}", line=lineno, column=col
                ) from None
            values["avg" if name == "Value" else name] = number
        stats_obj[metric] = values
    if not stats_obj:
        raise InputError(path, "no client metrics found (expected rows such as 'Request Latency (ms),...')")
    for metric in ("request_count", "total_isl", "total_osl"):
        if metric in stats_obj and is_number(stats_obj[metric].get("avg")):
            stats_obj[metric]["avg"] = round(stats_obj[metric]["avg"])
    if "output_token_throughput" in stats_obj:
        stats_obj["output_token_throughput"].pop("unit", None)
    if "request_throughput" in stats_obj:
        stats_obj["request_throughput"].pop("unit", None)
    for m in DISTRIBUTIONS:
        if m in stats_obj:
            unit = stats_obj[m].get("unit")
            if unit not in _TIME_SCALE:
                stats_obj[m].pop("unit", None)
    if "benchmark_duration" in stats_obj:
        stats_obj["benchmark_duration"]["unit"] = "sec"
    return aggregates_from_json(Fields(stats_obj, path, notes=notes), notes)


def _label(cell: str) -> tuple[str, str | None]:
    cell = cell.strip()
    unit = None
    if cell.endswith(")") and "(" in cell:
        cell, _, unit = cell[:-1].rpartition("(")
        cell = cell.strip()
    return cell.lower(), unit
