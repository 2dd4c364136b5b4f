"""The ``sglang-bench`` backend mirror: ``python -m sglang.bench_serving``
``--output-file`` JSONL (one line appended per run; the last is read unless
``FILE#LINE`` selects another).

Schema generations (see docs/formats.md): early 2025 (median TTFT/ITL and
mean/median E2E only), mid 2025 (+ request_throughput, std/p99 for every
metric, p95_itl_ms, concurrency, accept_length), late 2025 (+ tag,
server_info, total_throughput, more percentiles; request_rate may be
``"trace"``). Python's ``json.dumps`` writes ``request_rate`` inf as the bare
token ``Infinity`` and missing stats as ``NaN``: both are accepted on input and
never copied to output. ``--output-details`` adds the per-request arrays
(seconds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import (
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

METRICS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e_latency": "latency_ms"}
_EXTRA_NUMBERS = (
    "input_throughput",
    "total_throughput",
    "concurrency",
    "accept_length",
    "max_concurrency",
    "total_output_tokens_retokenized",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
)
_MARKERS = ('"total_output_tokens_retokenized"', '"mean_e2e_latency_ms"', '"median_e2e_latency_ms"')


def sniff_bench(head: bytes) -> bool:
    text = head_text(head).lstrip()
    return (
        text.startswith("{")
        and '"backend"' in text
        and any(m in text for m in _MARKERS)
        and '"model_id"' not in text
    )


def detect_version(obj: dict[str, Any]) -> str:
    if "tag" in obj or "server_info" in obj or "total_throughput" in obj:
        version = "2025-late"
    elif "request_throughput" in obj or "p95_itl_ms" in obj or "concurrency" in obj:
        version = "2025-mid"
    else:
        version = "2025-early"
    return version + ("+output-details" if has_arrays(obj) else "")


class SglangBenchMirror(BackendMirror):
    name: ClassVar[str] = "sglang-bench"
    description: ClassVar[str] = "sglang.bench_serving --output-file JSONL (all schema generations)"
    accepts_line: ClassVar[bool] = True

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_bench(head)

    def read(self, path: Path, line: int | None = None) -> dict[str, Any]:
        lineno, obj, notes = result_object(path, line, "sglang.bench_serving result lines")
        f = Fields(obj, path, line=lineno, notes=notes)
        require_result(f, self.name, METRICS)
        agg, extra, counts = result_figures(f, METRICS, ("completed",), _EXTRA_NUMBERS)
        agg["completed"] = counts["completed"]
        request_rate(f, extra, ("inf", "trace"), 'a number, Infinity, "inf" or "trace"')
        agg["extra"] = extra
        backend = f.string("backend") or "sglang"
        model = None
        server = f.sub("server_info")
        if server is not None:
            model = server.string("model_path") or server.string("served_model_name")
        requests = None
        if has_arrays(obj):
            requests = requests_from_arrays(f, backend=backend, model=model, notes=notes)
            agg["request_count"] = len(requests)
        else:
            notes.append("summary only (no --output-details arrays): run-level comparison only")
        metadata = {k: obj[k] for k in ("dataset_name", "tag") if isinstance(obj.get(k), str)}
        run = {
            "label": f.string("tag"),
            "backend": backend,
            "model": model,
            "provenance": provenance(
                path, self.name, detect_version(obj), notes, line=lineno, metadata=metadata
            ),
            "aggregates": clean_aggregates(agg),
        }
        return document(run, requests)
