"""The ``vllm-metrics`` backend mirror: a vLLM ``/metrics`` scrape.

V0 and V1 names are both read. Counters and histograms are summed over the
``engine`` label (V1 data-parallel engines) and any ``model_name``; KV usage
takes the maximum. A scrape is cumulative since server start: the
observation is the server's lifetime view, run-level only.

* ``gpu_cache_usage_perc`` (V0, early V1) / ``kv_cache_usage_perc`` (V1 >= 0.10):
  a fraction despite the name -> ``memory_pressure``;
* ``gpu_prefix_cache_hit_rate`` (V0 gauge, ``-1`` = prefix caching off) or
  ``prefix_cache_hits_total / prefix_cache_queries_total`` (V1, also the
  ``gpu_`` prefixed counters) -> ``prefix_cache_hit_rate``;
* ``time_to_first_token_seconds`` -> ``ttft_ms``; ``e2e_request_latency_seconds``
  -> ``latency_ms``; ``time_per_output_token_seconds`` (observed per token, an
  inter-token distribution) and ``inter_token_latency_seconds`` -> ``itl_ms``;
  ``request_time_per_output_token_seconds`` -> ``tpot_ms``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import Scrape, ScrapeMirror, clean_aggregates, document, histogram_figures, provenance

P = "vllm:"
HISTOGRAMS = {
    "time_to_first_token_seconds": "ttft_ms",
    "e2e_request_latency_seconds": "latency_ms",
    "inter_token_latency_seconds": "itl_ms",
    "time_per_output_token_seconds": "itl_ms",
    "request_time_per_output_token_seconds": "tpot_ms",
}
GAUGES = ("num_requests_running", "num_requests_waiting", "num_requests_swapped", "cpu_cache_usage_perc")
#: every family the reader maps (a scrape needs at least one)
FAMILIES = (
    *HISTOGRAMS,
    *GAUGES,
    "prompt_tokens_total",
    "generation_tokens_total",
    "request_success_total",
    "num_preemptions_total",
    "kv_cache_usage_perc",
    "gpu_cache_usage_perc",
    "prefix_cache_queries_total",
    "gpu_prefix_cache_queries_total",
    "gpu_prefix_cache_hit_rate",
)


def detect_version(s: Scrape) -> str:
    if s.label_values("engine") or s.has(
        P + "kv_cache_usage_perc",
        P + "prefix_cache_queries_total",
        P + "gpu_prefix_cache_queries_total",
        P + "gpu_prefix_cache_queries",
    ):
        return "v1"
    if s.has(P + "num_requests_swapped", P + "cpu_cache_usage_perc", P + "gpu_prefix_cache_hit_rate"):
        return "v0"
    return "unknown"


def scrape_aggregates(s: Scrape, notes: list[str]) -> dict[str, Any]:
    agg: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    histogram_figures(s, P, HISTOGRAMS, agg, extra, notes)
    agg["total_input_tokens"] = _count(s.total(P + "prompt_tokens_total"))
    agg["total_output_tokens"] = _count(s.total(P + "generation_tokens_total"))
    success = s.by_label(P + "request_success_total", "finished_reason")
    if success:
        agg["completed"] = _count(sum(success.values()))
        for reason, value in success.items():
            extra[f"request_success.{reason}"] = value
    agg["preemptions"] = _count(s.total(P + "num_preemptions_total"))
    usage = s.maximum(P + "kv_cache_usage_perc")
    if usage is None:
        usage = s.maximum(P + "gpu_cache_usage_perc")
    if usage is not None:
        agg["memory_pressure"] = round(min(max(usage, 0.0), 1.0), 6)
        notes.append("memory_pressure is the KV-cache usage gauge at scrape time, not a peak")
    hits = queries = None
    for prefix in ("prefix_cache", "gpu_prefix_cache"):
        queries = s.total(f"{P}{prefix}_queries_total")
        hits = s.total(f"{P}{prefix}_hits_total")
        if queries is not None:
            break
    if queries is not None:
        extra["prefix_cache_queries"] = queries
        if hits is not None:
            extra["prefix_cache_hits"] = hits
            if queries > 0:
                agg["prefix_cache_hit_rate"] = round(hits / queries, 6)
    else:
        rate = s.maximum(P + "gpu_prefix_cache_hit_rate")
        if rate is not None and rate < 0:
            notes.append("gpu_prefix_cache_hit_rate is -1: prefix caching disabled")
        elif rate is not None:
            agg["prefix_cache_hit_rate"] = round(min(rate, 1.0), 6)
    for gauge in GAUGES:
        v = s.total(P + gauge)
        if v is not None:
            extra[gauge] = v
    engines = s.label_values("engine")
    if engines:
        extra["engines"] = len(engines)
    agg["extra"] = extra
    return agg


def _count(v: float | None) -> int | None:
    return None if v is None else round(v)


def config_labels(s: Scrape) -> dict[str, str]:
    for sample in s.series(P + "cache_config_info"):
        return dict(sorted(sample.labels))
    return {}


class VllmMetricsMirror(ScrapeMirror):
    name: ClassVar[str] = "vllm-metrics"
    description: ClassVar[str] = "vLLM /metrics Prometheus text (V0 and V1 names, engine label)"
    prefix: ClassVar[str] = P
    families: ClassVar[tuple[str, ...]] = FAMILIES
    expected: ClassVar[str | None] = "a vLLM /metrics scrape"

    def read(self, path: Path) -> dict[str, Any]:
        s = self.scrape(path)
        notes = ["a /metrics scrape is cumulative since server start: run-level figures only"]
        agg = scrape_aggregates(s, notes)
        models = s.label_values("model_name")
        if len(models) > 1:
            notes.append(f"several models in one scrape ({', '.join(models)}): figures are summed")
        cfg = config_labels(s)
        if cfg.get("enable_prefix_caching") == "False":
            notes.append("cache_config_info: prefix caching disabled")
        run = {
            "backend": "vllm",
            "model": models[0] if len(models) == 1 else None,
            "provenance": provenance(
                path,
                self.name,
                detect_version(s),
                notes,
                cache_config={k: cfg[k] for k in ("block_size", "num_gpu_blocks") if k in cfg},
            ),
            "aggregates": clean_aggregates(agg),
        }
        return document(run)
