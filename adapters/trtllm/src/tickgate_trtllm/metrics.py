"""Prometheus mirrors for TensorRT-LLM deployments.

* ``triton-trtllm-metrics``: the Triton TensorRT-LLM backend's ``nv_trt_llm_*``
  gauges (``kv_cache_block_type`` = max/free/used/tokens_per/fraction,
  ``request_type`` = waiting/context/scheduled/active/max, runtime memory);
* ``trtllm-metrics``: ``trtllm_``-prefixed names (trtllm-serve's native
  Prometheus endpoint and Dynamo's relay): request success by finish reason,
  TTFT / queue-time histograms, KV utilisation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import ScrapeMirror, clean_aggregates, document, histogram_ms, provenance

NV = "nv_trt_llm_"
TR = "trtllm_"
#: the families each reader maps (a scrape needs at least one)
NV_FAMILIES = (
    "kv_cache_block_metrics",
    "request_metrics",
    "runtime_memory_metrics",
    "inflight_batcher_metrics",
)
TR_FAMILIES = (
    "request_success_total",
    "time_to_first_token_seconds",
    "e2e_request_latency_seconds",
    "inter_token_latency_seconds",
    "time_per_output_token_seconds",
    "request_queue_time_seconds",
    "kv_cache_utilization",
    "num_requests_waiting",
    "num_requests_running",
)


class TritonTrtllmMetricsMirror(ScrapeMirror):
    name: ClassVar[str] = "triton-trtllm-metrics"
    description: ClassVar[str] = "Triton TensorRT-LLM backend nv_trt_llm_* Prometheus metrics"
    prefix: ClassVar[str] = NV
    families: ClassVar[tuple[str, ...]] = NV_FAMILIES
    expected: ClassVar[str | None] = "a Triton TensorRT-LLM scrape"

    def read(self, path: Path) -> dict[str, Any]:
        s = self.scrape(path)
        notes = ["a /metrics scrape is a point-in-time view: run-level figures only"]
        agg: dict[str, Any] = {"extra": {}}
        blocks = s.by_label(NV + "kv_cache_block_metrics", "kv_cache_block_type")
        if "fraction" in blocks:
            agg["memory_pressure"] = round(min(max(blocks["fraction"], 0.0), 1.0), 6)
            notes.append("memory_pressure is the KV block usage fraction at scrape time, not a peak")
        elif blocks.get("max"):
            agg["memory_pressure"] = round(blocks.get("used", 0.0) / blocks["max"], 6)
        for kind, value in blocks.items():
            agg["extra"][f"kv_cache_blocks.{kind}"] = value
        for kind, value in s.by_label(NV + "request_metrics", "request_type").items():
            agg["extra"][f"requests.{kind}"] = value
        for kind, value in s.by_label(NV + "runtime_memory_metrics", "memory_type").items():
            agg["extra"][f"runtime_memory.{kind}"] = value
        for kind, value in s.by_label(
            NV + "inflight_batcher_metrics", "inflight_batcher_specific_metric"
        ).items():
            agg["extra"][f"inflight_batcher.{kind}"] = value
        models = s.label_values("model")
        version = "triton-backend" + (
            "" if not s.label_values("version") else f" (model version {s.label_values('version')[0]})"
        )
        return document(
            {
                "backend": "trtllm",
                "model": models[0] if len(models) == 1 else None,
                "provenance": provenance(path, self.name, version, notes),
                "aggregates": clean_aggregates(agg),
            }
        )


class TrtllmMetricsMirror(ScrapeMirror):
    name: ClassVar[str] = "trtllm-metrics"
    description: ClassVar[str] = "trtllm_* Prometheus metrics (trtllm-serve native endpoint, Dynamo relay)"
    prefix: ClassVar[str] = TR
    families: ClassVar[tuple[str, ...]] = TR_FAMILIES

    def read(self, path: Path) -> dict[str, Any]:
        s = self.scrape(path)
        notes = ["a /metrics scrape is cumulative since server start: run-level figures only"]
        agg: dict[str, Any] = {"extra": {}}
        success = s.by_label(TR + "request_success_total", "finished_reason")
        if success:
            agg["completed"] = round(sum(success.values()))
            for reason, value in success.items():
                agg["extra"][f"request_success.{reason}"] = value
        for name, target in (
            ("time_to_first_token_seconds", "ttft_ms"),
            ("e2e_request_latency_seconds", "latency_ms"),
            ("inter_token_latency_seconds", "itl_ms"),
            ("time_per_output_token_seconds", "tpot_ms"),
        ):
            h = s.histogram(TR + name)
            if h is not None:
                pct = histogram_ms(h, TR + name, notes)
                if pct:
                    agg[target] = pct
        queue = s.histogram(TR + "request_queue_time_seconds")
        if queue is not None and queue.sum is not None and queue.count:
            agg["extra"]["queue_time_ms.mean"] = round(queue.sum / queue.count * 1000, 6)
        usage = s.maximum(TR + "kv_cache_utilization")
        if usage is not None:
            agg["memory_pressure"] = round(min(max(usage, 0.0), 1.0), 6)
        for gauge in ("num_requests_waiting", "num_requests_running"):
            v = s.total(TR + gauge)
            if v is not None:
                agg["extra"][gauge] = v
        models = s.label_values("model_name")
        version = "dynamo-relay" if s.label_values("engine_type") else "trtllm-serve"
        return document(
            {
                "backend": "trtllm",
                "model": models[0] if len(models) == 1 else None,
                "provenance": provenance(path, self.name, version, notes),
                "aggregates": clean_aggregates(agg),
            }
        )
