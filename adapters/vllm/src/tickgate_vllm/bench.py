"""The ``vllm-bench`` backend mirror: ``vllm bench serve`` /
``benchmarks/benchmark_serving.py`` result files.

A result is one JSON object (``--save-result``) or one line of a JSONL file
(``--append-result``; the last line is read unless ``FILE#LINE`` selects
another). Summary keys are milliseconds (``mean_ttft_ms``, ``p99_itl_ms``...),
durations seconds; the per-request arrays (``--save-detailed``, or always in
pre-2025 versions) are seconds. Quirks handled: the ``"request_goodput:"`` key
with a stray colon (2024 to mid-2025), ``best_of`` (old versions),
``request_rate`` written as the string ``"inf"``, ``--metadata`` keys merged
at top level, and CI post-processed files without ``duration``/``completed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import (
    ARRAY_KEYS,
    RESULT_KEYS,
    BackendMirror,
    Fields,
    clean_aggregates,
    document,
    has_arrays,
    head_text,
    provenance,
    request_rate,
    requests_from_arrays,
    require_result,
    result_figures,
    result_object,
)

METRICS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2el": "latency_ms"}
#: top-level keys the reader interprets (everything else scalar is metadata)
KNOWN = {
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "request_goodput:",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
    "best_of",
    "ramp_up_strategy",
    "ramp_up_start_rps",
    "ramp_up_end_rps",
    "latencies",
    "start_times",
    "queue_times",
    *ARRAY_KEYS,
}
_EXTRA_NUMBERS = (
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "burstiness",
    "max_concurrency",
    "rtfx",
    "best_of",
)


def sniff_bench(head: bytes) -> bool:
    """A result object naming its model/tokenizer (vLLM's keys; SGLang's
    results carry ``total_output_tokens_retokenized`` instead). The summary
    statistics (``*_ttft_ms``) are not required in the head: a
    ``--save-detailed`` result writes its per-request arrays before them, so
    in a 200-request file they start past the first 64 KiB."""
    text = head_text(head).lstrip()
    return (
        text.startswith("{")
        and any(k in text for k in ('"model_id"', '"tokenizer_id"', '"request_goodput:"', '"best_of"'))
        and any(k in text for k in ('_ttft_ms"', '"num_prompts"', '"ttfts"'))
        and '"total_output_tokens_retokenized"' not in text
    )


def detect_version(obj: dict[str, Any]) -> str:
    if "request_goodput:" in obj or "best_of" in obj:
        version = "benchmark_serving-legacy"
    elif "endpoint_type" in obj or "max_concurrent_requests" in obj or "rtfx" in obj:
        version = "vllm-bench-serve"
    else:
        version = "benchmark_serving"
    if "duration" not in obj and "completed" not in obj:
        version += "+ci-reduced"
    if has_arrays(obj):
        version += "+detailed"
    return version


class VllmBenchMirror(BackendMirror):
    name: ClassVar[str] = "vllm-bench"
    description: ClassVar[str] = "vllm bench serve / benchmark_serving.py result JSON or appended JSONL"
    accepts_line: ClassVar[bool] = True

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_bench(head)

    def read(self, path: Path, line: int | None = None) -> dict[str, Any]:
        lineno, obj, notes = result_object(path, line, "a vllm bench serve result", whole_document=True)
        return read_result(obj, path, lineno, notes, fmt=self.name)


def read_result(obj: Any, path: Path, lineno: int | None, notes: list[str], *, fmt: str) -> dict[str, Any]:
    f = Fields(obj, path, line=lineno, notes=notes)
    require_result(f, fmt, METRICS, ("completed", "num_prompts", *RESULT_KEYS[1:]))
    agg, extra, counts = result_figures(f, METRICS, ("completed", "failed", "num_prompts"), _EXTRA_NUMBERS)
    completed, failed, num_prompts = counts["completed"], counts["failed"], counts["num_prompts"]
    agg["completed"] = completed
    agg["failed"] = failed
    if completed is not None and failed is not None:
        agg["request_count"] = completed + failed
        if completed + failed:
            agg["error_rate"] = round(failed / (completed + failed), 6)
    elif num_prompts is not None:
        agg["request_count"] = num_prompts
    for key in ("request_goodput", "request_goodput:"):
        v = f.number(key)
        if v is not None:
            extra["request_goodput"] = v
    request_rate(f, extra, ("inf",), 'a number or "inf"')
    agg["extra"] = extra
    metadata = {
        k: v
        for k, v in sorted(obj.items())
        if k not in KNOWN and not k.endswith("_ms") and isinstance(v, (str, int, float, bool))
    }
    model = f.string("model_id")
    backend = f.string("backend") or "vllm"
    requests = None
    if has_arrays(obj):
        requests = requests_from_arrays(f, backend=backend, model=model, notes=notes)
    else:
        notes.append("summary only (no per-request arrays): run-level comparison only")
    run = {
        "label": f.string("label") or f.string("date"),
        "backend": backend,
        "model": model,
        "provenance": provenance(path, fmt, detect_version(obj), notes, line=lineno, metadata=metadata),
        "aggregates": clean_aggregates(agg),
    }
    return document(run, requests)
