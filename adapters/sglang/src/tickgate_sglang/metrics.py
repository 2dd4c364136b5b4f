"""The ``sglang-metrics`` backend mirror: an SGLang ``/metrics`` scrape.

Two generations: legacy (2024, label ``name=``, ``num_requests_running``,
``num_requests_waiting``, ``cache_hit_rate`` in **percent**) and 2025+ (label
``model_name=``, ``num_running_reqs``, ``num_queue_reqs``, ``token_usage``,
``cache_hit_rate`` as a **fraction**). Counters and histograms are summed over
series (tp/pp ranks, engines); the scrape is cumulative since server start.
``time_per_output_token_seconds`` is observed once per output token, so it
feeds ``itl_ms`` (as does ``inter_token_latency_seconds``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import Scrape, ScrapeMirror, clean_aggregates, document, histogram_figures, provenance

P = "sglang:"
HISTOGRAMS = {
    "time_to_first_token_seconds": "ttft_ms",
    "e2e_request_latency_seconds": "latency_ms",
    "inter_token_latency_seconds": "itl_ms",
    "time_per_output_token_seconds": "itl_ms",
}
GAUGES = {
    "num_running_reqs": "num_running_reqs",
    "num_requests_running": "num_running_reqs",
    "num_queue_reqs": "num_queue_reqs",
    "num_requests_waiting": "num_queue_reqs",
    "num_used_tokens": "num_used_tokens",
    "gen_throughput": "gen_throughput",
    "max_total_num_tokens": "max_total_num_tokens",
    "num_retracted_reqs": "num_retracted_reqs",
}
#: every family the reader maps (a scrape needs at least one)
FAMILIES = (
    *HISTOGRAMS,
    *GAUGES,
    "waiting_request_latency_seconds",
    "prompt_tokens_total",
    "generation_tokens_total",
    "token_usage",
    "cache_hit_rate",
)


def detect_version(s: Scrape) -> str:
    if s.label_values("name") and not s.label_values("model_name"):
        return "legacy-2024"
    return "2025"


def scrape_aggregates(s: Scrape, legacy: bool, notes: list[str]) -> dict[str, Any]:
    agg: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    histogram_figures(s, P, HISTOGRAMS, agg, extra, notes)
    waiting = s.histogram(P + "waiting_request_latency_seconds")
    if waiting is not None and waiting.sum is not None and waiting.count:
        extra["queue_time_ms.mean"] = round(waiting.sum / waiting.count * 1000, 6)
    for name, target in (
        ("prompt_tokens_total", "total_input_tokens"),
        ("generation_tokens_total", "total_output_tokens"),
    ):
        v = s.total(P + name)
        if v is not None:
            agg[target] = round(v)
    usage = s.maximum(P + "token_usage")
    if usage is not None:
        agg["memory_pressure"] = round(min(max(usage, 0.0), 1.0), 6)
        notes.append("memory_pressure is the token_usage gauge at scrape time, not a peak")
    rate = s.maximum(P + "cache_hit_rate")
    if rate is not None:
        if legacy or rate > 1:
            notes.append(f"cache_hit_rate {rate:g} is a percentage (legacy SGLang); divided by 100")
            rate = rate / 100
        agg["prefix_cache_hit_rate"] = round(min(max(rate, 0.0), 1.0), 6)
    retracted = s.total(P + "num_retracted_reqs")
    if retracted is not None:
        agg["preemptions"] = round(retracted)
    for name, target in GAUGES.items():
        v = s.total(P + name)
        if v is not None:
            extra[target] = v
    agg["extra"] = extra
    return agg


class SglangMetricsMirror(ScrapeMirror):
    name: ClassVar[str] = "sglang-metrics"
    description: ClassVar[str] = "SGLang /metrics Prometheus text (legacy name= label, 2025 names)"
    prefix: ClassVar[str] = P
    families: ClassVar[tuple[str, ...]] = FAMILIES
    expected: ClassVar[str | None] = "an SGLang /metrics scrape"

    def read(self, path: Path) -> dict[str, Any]:
        s = self.scrape(path)
        version = detect_version(s)
        notes = ["a /metrics scrape is cumulative since server start: run-level figures only"]
        agg = scrape_aggregates(s, version.startswith("legacy"), notes)
        models = s.label_values("model_name") or s.label_values("name")
        run = {
            "backend": "sglang",
            "model": models[0] if len(models) == 1 else None,
            "provenance": provenance(path, self.name, version, notes),
            "aggregates": clean_aggregates(agg),
        }
        return document(run)
