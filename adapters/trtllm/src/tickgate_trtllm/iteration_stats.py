"""The ``trtllm-iteration-stats`` backend mirror: per-iteration executor stats.

Three shapes of the same serializer: the JSON array that
``getLatestIterationStats()`` / older ``trtllm-serve /metrics`` return, the
JSONL of ``trtllm-bench --iteration_log`` (one object per line), and the legacy
Triton backend log lines (TRT-LLM 0.6 era) with human-readable keys
(``"Used KV cache blocks"``...) after a glog prefix. Peak KV usage
(used/max blocks) becomes ``memory_pressure``; queue depth, active requests,
paused requests and iteration latency go to ``extra``.
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
    not_this_format,
    parse_engine_json,
    provenance,
    read_text,
    summary_stats,
)

#: legacy Triton log keys -> executor API names
LEGACY = {
    "Used KV cache blocks": "usedNumBlocks",
    "Max KV cache blocks": "maxNumBlocks",
    "Free KV cache blocks": "freeNumBlocks",
    "Tokens per KV cache block": "tokensPerBlock",
    "Active Request Count": "numActiveRequests",
    "Scheduled Requests": "numScheduledRequests",
    "Context Requests": "numContextRequests",
    "Generation Requests": "numGenRequests",
    "Total Context Tokens": "numCtxTokens",
    "Iteration Counter": "iter",
    "Timestamp": "timestamp",
}
#: keys of an iteration-stats object the reader uses: a file with none of them is not iteration stats
DEFINING = (
    "kvCacheStats",
    "inflightBatchingStats",
    "iter",
    "iterLatencyMS",
    "numActiveRequests",
    "numQueuedRequests",
    "numCompletedRequests",
    "usedNumBlocks",
    "maxNumBlocks",
)
_LOG_LINE = re.compile(r"^[IWE]\d{4} [0-9:.]+\s+\d+\s+\S+\] (\{.*\})\s*$")


def _iterations(text: str, path: Path) -> tuple[list[tuple[int | None, dict[str, Any]]], str]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        data = parse_engine_json(text, path)
        if not isinstance(data, list):
            raise InputError(path, "expected a JSON array of iteration stats")
        return [(None, item) for item in data], "executor-json-array"
    items: list[tuple[int | None, dict[str, Any]]] = []
    shape = "iteration-log-jsonl"
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        m = _LOG_LINE.match(line)
        if m:
            shape = "triton-backend-log"
            obj = parse_engine_json(m.group(1), path, line=lineno)
            if isinstance(obj, dict):
                obj = {LEGACY.get(k, k): v for k, v in obj.items()}
            items.append((lineno, obj))
        elif line.lstrip().startswith("{"):
            items.append((lineno, parse_engine_json(line, path, line=lineno)))
        elif shape == "triton-backend-log":
            continue  # other log lines between stats lines
        else:
            raise InputError(
                path, "expected an iteration-stats JSON object or a Triton stats log line", line=lineno
            )
    return items, shape


def sniff(head: bytes) -> bool:
    text = head_text(head)
    if '"kvCacheStats"' in text or '"inflightBatchingStats"' in text:
        return '"iterLatencyMS"' in text or '"numActiveRequests"' in text or '"iter"' in text
    return "libtensorrtllm" in text and '"Active Request Count"' in text


class TrtllmIterationStatsMirror(BackendMirror):
    name: ClassVar[str] = "trtllm-iteration-stats"
    description: ClassVar[str] = (
        "TensorRT-LLM executor iteration stats (JSON array, iteration log, Triton log)"
    )

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff(head)

    def read(self, path: Path) -> dict[str, Any]:
        text = read_text(path)
        if not text.strip():
            raise InputError(path, "empty file: expected TensorRT-LLM iteration stats")
        notes: list[str] = []
        items, shape = _iterations(text, path)
        if not items:
            raise InputError(path, "no iteration stats found")
        if not any(
            isinstance(item, dict) and any(item.get(k) is not None for k in DEFINING) for _, item in items
        ):
            lineno, first = items[0]
            raise not_this_format(
                path,
                self.name,
                "iteration-stats objects with at least one of "
                + ", ".join(DEFINING)
                + " (or Triton log lines with 'Used KV cache blocks')",
                found=first if isinstance(first, dict) else None,
                line=lineno,
                json_path="$" if lineno else "$[0]",
            )
        pressure: list[float] = []
        latencies: list[float] = []
        active: list[int] = []
        queued: list[int] = []
        paused = completed = 0
        last_kv: Fields | None = None
        for i, (lineno, item) in enumerate(items):
            f = Fields(item, path, line=lineno, prefix="$" if lineno else f"$[{i}]", notes=notes)
            kv = f.sub("kvCacheStats") or f
            used, maximum = kv.count("usedNumBlocks"), kv.count("maxNumBlocks")
            if used is not None and maximum:
                if used > maximum:
                    raise kv.fail("usedNumBlocks", f"{used} used blocks exceed maxNumBlocks {maximum}")
                pressure.append(used / maximum)
            if f.sub("kvCacheStats") is not None:
                last_kv = kv
            lat = f.number("iterLatencyMS")
            if lat is not None:
                latencies.append(lat)
            for key, sink in (("numActiveRequests", active), ("numQueuedRequests", queued)):
                v = f.count(key)
                if v is not None:
                    sink.append(v)
            batching = f.sub("inflightBatchingStats") or f
            paused += batching.count("numPausedRequests") or 0
            completed += f.count("numCompletedRequests") or 0
        agg: dict[str, Any] = {"extra": {"iterations": len(items)}}
        if pressure:
            agg["memory_pressure"] = round(max(pressure), 6)
        if latencies:
            stats = summary_stats(latencies)
            agg["extra"].update({"iter_latency_ms.mean": stats["mean"], "iter_latency_ms.max": stats["max"]})
        if active:
            agg["extra"]["max_active_requests"] = max(active)
        if queued:
            agg["extra"]["max_queued_requests"] = max(queued)
        agg["extra"]["paused_request_iterations"] = paused
        if completed:
            agg["completed"] = completed
        if last_kv is not None:
            reused, missed = last_kv.count("reusedBlocks"), last_kv.count("missedBlocks")
            if reused is not None and missed is not None and reused + missed > 0:
                agg["prefix_cache_hit_rate"] = round(reused / (reused + missed), 6)
        notes.append("memory_pressure is the peak of usedNumBlocks / maxNumBlocks over the iterations")
        return document(
            {
                "backend": "trtllm",
                "provenance": provenance(path, self.name, shape, notes),
                "aggregates": clean_aggregates(agg),
            }
        )
