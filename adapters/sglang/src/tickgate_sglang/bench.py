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

from tickgate.errors import InputError
from tickgate.interfaces import BackendMirror
from tickgate.readers.benchkeys import has_arrays, require_result, requests_from_arrays, summary_percentiles
from tickgate.readers.common import (Fields, clean_aggregates, document, head_text, is_number, iter_json_lines,
                                     pick_line, provenance, read_text)

METRICS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e_latency": "latency_ms"}
_EXTRA_NUMBERS = ("input_throughput", "total_throughput", "concurrency", "accept_length", "max_concurrency",
                  "total_output_tokens_retokenized", "random_input_len", "random_output_len", "random_range_ratio")
_MARKERS = ('"total_output_tokens_retokenized"', '"mean_e2e_latency_ms"', '"median_e2e_latency_ms"')


def sniff_bench(head: bytes) -> bool:
    text = head_text(head).lstrip()
    return text.startswith("{") and '"backend"' in text and any(m in text for m in _MARKERS) \
        and '"model_id"' not in text


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
        text = read_text(path)
        if not text.strip():
            raise InputError(path, "empty file: expected sglang.bench_serving result lines")
        notes: list[str] = []
        lineno, obj = pick_line(path, list(iter_json_lines(path, text)), line, "result", notes)
        f = Fields(obj, path, line=lineno, notes=notes)
        require_result(f, self.name, METRICS)
        agg: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        agg.update(summary_percentiles(f, METRICS, extra))
        agg["completed"] = f.count("completed")
        agg["duration_s"] = f.number("duration")
        agg["request_throughput"] = f.number("request_throughput")
        agg["output_throughput"] = f.number("output_throughput")
        agg["total_input_tokens"] = f.count("total_input_tokens")
        agg["total_output_tokens"] = f.count("total_output_tokens")
        for key in _EXTRA_NUMBERS:
            v = f.number(key)
            if v is not None:
                extra[key] = v
        rate = obj.get("request_rate")
        if isinstance(rate, str) and rate in ("inf", "trace"):
            extra["request_rate"] = rate
        elif is_number(rate):
            extra["request_rate"] = "inf" if rate == float("inf") else f.number("request_rate")
        elif rate is not None:
            raise f.fail("request_rate", f"expected a number, Infinity, \"inf\" or \"trace\", got {rate!r}")
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
        run = {"label": f.string("tag"), "backend": backend, "model": model,
               "provenance": provenance(path, self.name, detect_version(obj), notes, line=lineno,
                                        metadata=metadata),
               "aggregates": clean_aggregates(agg)}
        return document(run, requests)
