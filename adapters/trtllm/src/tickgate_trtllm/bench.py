"""The ``trtllm-bench`` backend mirror: ``trtllm-bench throughput/latency``
results, either ``--report_json`` (``engine``, ``world_info``,
``request_info``, ``performance``, ``streaming_metrics``) or the report it
prints to stdout. Percentile objects use ``minimum/maximum/average/p50/
p90/p95/p99`` in ms; ``world_info.scheduling_policy`` (``GUARANTEED_NO_EVICT``,
``MAX_UTILIZATION``, ``STATIC_BATCH``) becomes the run's scheduler.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from tickgate import (
    BackendMirror,
    Fields,
    InputError,
    clean_aggregates,
    document,
    head_text,
    parse_engine_json,
    provenance,
    read_text,
    require_any_key,
)

#: keys of ``performance`` the reader uses: a report needs at least one
PERFORMANCE_KEYS = (
    "total_latency_ms",
    "request_throughput_req_s",
    "system_output_throughput_tok_s",
    "request_latency_percentiles_ms",
    "avg_request_latency_ms",
    "system_total_throughput_tok_s",
    "output_throughput_per_user_tok_s",
    "output_throughput_per_gpu_tok_s",
)
_PCT = {
    "minimum": "min",
    "maximum": "max",
    "average": "mean",
    "p50": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
}


def _percentiles(f: Fields | None) -> dict[str, float]:
    if f is None:
        return {}
    out = {}
    for key, target in _PCT.items():
        v = f.number(key)
        if v is not None:
            out[target] = round(v, 6)
    if "p50" in out:
        out["median"] = out["p50"]
    return out


def from_report(obj: Any, path: Path, notes: list[str]) -> dict[str, Any]:
    f = Fields(obj, path, notes=notes)
    perf = f.sub("performance", required=True)
    assert perf is not None
    require_any_key(perf, "trtllm-bench", PERFORMANCE_KEYS)
    agg: dict[str, Any] = {"extra": {}}
    total_ms = perf.number("total_latency_ms")
    if total_ms is not None:
        agg["duration_s"] = round(total_ms / 1000, 6)
    agg["request_throughput"] = perf.number("request_throughput_req_s")
    agg["output_throughput"] = perf.number("system_output_throughput_tok_s")
    agg["latency_ms"] = _percentiles(perf.sub("request_latency_percentiles_ms"))
    if "mean" not in agg["latency_ms"] and perf.number("avg_request_latency_ms") is not None:
        agg["latency_ms"]["mean"] = perf.number("avg_request_latency_ms")
    for key in (
        "system_total_throughput_tok_s",
        "output_throughput_per_user_tok_s",
        "output_throughput_per_gpu_tok_s",
    ):
        v = perf.number(key)
        if v is not None:
            agg["extra"][key] = v
    req = f.sub("request_info")
    if req is not None:
        n = req.count("num_requests")
        agg["request_count"] = n
        for key in ("avg_num_concurrent_requests", "avg_input_length", "avg_output_length"):
            v = req.number(key)
            if v is not None:
                agg["extra"][key] = v
    stream = f.sub("streaming_metrics")
    if stream is not None:
        agg["ttft_ms"] = _percentiles(stream.sub("ttft_percentiles"))
        agg["tpot_ms"] = _percentiles(stream.sub("tpot_percentiles"))
        for key, target in (("avg_ttft_ms", "ttft_ms"), ("avg_tpot_ms", "tpot_ms")):
            v = stream.number(key)
            if v is not None and "mean" not in agg[target]:
                agg[target]["mean"] = round(v, 6)
    else:
        notes.append("no streaming_metrics (run without --streaming): no TTFT/TPOT")
    engine = f.sub("engine")
    world = f.sub("world_info")
    model = engine.string("model") if engine else None
    version = (engine.string("version") if engine else None) or "unknown"
    scheduler = world.string("scheduling_policy") if world else None
    if world is not None:
        for key in ("tp_size", "pp_size", "max_batch_size", "max_num_tokens", "kv_cache_percentage"):
            v = world.number(key)
            if v is not None:
                agg["extra"][key] = v
    return document(
        {
            "backend": "trtllm",
            "model": model,
            "scheduler": scheduler,
            "provenance": provenance(path, "trtllm-bench", f"report-json (TensorRT-LLM {version})", notes),
            "aggregates": clean_aggregates(agg),
        }
    )


_KV = re.compile(r"^\s*([^:\[\]=]+?)\s*:\s+(\S.*?)\s*$")
_ROW = re.compile(
    r"^\s*\[(TPOT|TTFT|GTPS|Latency)\]\s+(MINIMUM|MAXIMUM|AVERAGE|P50|P90|P95|P99)\s*:\s*(\S+)\s*$"
)
_STDOUT_FIELDS = {
    "Model": ("engine", "model"),
    "TensorRT-LLM Version": ("engine", "version"),
    "Number of requests": ("request_info", "num_requests"),
    "Number of concurrent requests": ("request_info", "avg_num_concurrent_requests"),
    "Average Input Length (tokens)": ("request_info", "avg_input_length"),
    "Average Output Length (tokens)": ("request_info", "avg_output_length"),
    "TP Size": ("world_info", "tp_size"),
    "PP Size": ("world_info", "pp_size"),
    "Max Runtime Batch Size": ("world_info", "max_batch_size"),
    "Max Runtime Tokens": ("world_info", "max_num_tokens"),
    "Scheduling Policy": ("world_info", "scheduling_policy"),
    "Request Throughput (req/sec)": ("performance", "request_throughput_req_s"),
    "Total Output Throughput (tokens/sec)": ("performance", "system_output_throughput_tok_s"),
    "Total Token Throughput (tokens/sec)": ("performance", "system_total_throughput_tok_s"),
    "Total Latency (ms)": ("performance", "total_latency_ms"),
    "Average request latency (ms)": ("performance", "avg_request_latency_ms"),
    "Per User Output Throughput [w/ ctx] (tps/user)": ("performance", "output_throughput_per_user_tok_s"),
    "Per GPU Output Throughput (tps/gpu)": ("performance", "output_throughput_per_gpu_tok_s"),
    "Average time-to-first-token [TTFT] (ms)": ("streaming_metrics", "avg_ttft_ms"),
    "Average time-per-output-token [TPOT] (ms)": ("streaming_metrics", "avg_tpot_ms"),
}
_SECTIONS = {
    "TPOT": "tpot_percentiles",
    "TTFT": "ttft_percentiles",
    "GTPS": "gen_tps_percentiles",
    "Latency": "request_latency_percentiles_ms",
}
_STRINGS = {"model", "version", "scheduling_policy"}


def stdout_to_report(text: str, path: Path) -> dict[str, Any]:
    """The printed report as the report_json structure (numbers parsed, located errors)."""
    report: dict[str, dict[str, Any]] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        row = _ROW.match(line)
        if row:
            section = "performance" if row.group(1) == "Latency" else "streaming_metrics"
            value = _float(row.group(3), path, lineno)
            report.setdefault(section, {}).setdefault(_SECTIONS[row.group(1)], {})[row.group(2).lower()] = (
                value
            )
            continue
        kv = _KV.match(line)
        if not kv or kv.group(1) not in _STDOUT_FIELDS:
            continue
        section, key = _STDOUT_FIELDS[kv.group(1)]
        raw = kv.group(2)
        if key in _STRINGS:
            report.setdefault(section, {})[key] = raw
        elif raw != "None":
            report.setdefault(section, {})[key] = _float(raw.rstrip("%"), path, lineno)
    if "performance" not in report:
        raise InputError(path, "no PERFORMANCE OVERVIEW found (expected trtllm-bench report output)")
    for figures in report.values():
        for key in ("num_requests",):
            if key in figures:
                figures[key] = int(figures[key])
    return report


def _float(text: str, path: Path, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(path, f"expected a number, got {text!r}", line=line) from None


class TrtllmBenchMirror(BackendMirror):
    name: ClassVar[str] = "trtllm-bench"
    description: ClassVar[str] = "trtllm-bench report JSON (--report_json) or its printed report"

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head)
        if text.lstrip().startswith("{"):
            return '"performance"' in text and ('"world_info"' in text or '"request_info"' in text)
        return "= PERFORMANCE OVERVIEW" in text or (
            "TensorRT-LLM Version:" in text and "= REQUEST DETAILS" in text
        )

    def read(self, path: Path) -> dict[str, Any]:
        text = read_text(path)
        if not text.strip():
            raise InputError(path, "empty file: expected a trtllm-bench report")
        notes = ["trtllm-bench reports run-level statistics only (use --request_json for per-request data)"]
        if text.lstrip().startswith("{"):
            return from_report(parse_engine_json(text, path), path, notes)
        doc = from_report(stdout_to_report(text, path), path, notes)
        prov = doc["run"]["provenance"]
        prov["format_version"] = prov["format_version"].replace("report-json", "stdout")
        return doc
