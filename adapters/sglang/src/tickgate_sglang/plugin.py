"""Entry point ``sglang = tickgate_sglang.plugin``: this adapter's readers of
what SGLang and its bench client write (bench_serving JSONL, /metrics, SSE
streams, KV events), its streaming-evidence parser and the workload reader of a
bench_serving run (``tickgate import sglang-bench``).

Implementation modules are imported inside the hooks (lazy start-up).
"""

from __future__ import annotations

from typing import Any

from tickgate import hookimpl


@hookimpl
def register_backend_mirrors(register: Any) -> None:
    from .bench import SglangBenchMirror
    from .kv_events import SglangKvEventsMirror
    from .metrics import SglangMetricsMirror
    from .sse import SglangSseMirror

    register(SglangBenchMirror)
    register(SglangMetricsMirror)
    register(SglangSseMirror)
    register(SglangKvEventsMirror)


@hookimpl
def register_evidence_parsers(register: Any) -> None:
    from .sse import SglangSseEvidence

    register(SglangSseEvidence)


@hookimpl
def register_workload_readers(register: Any) -> None:
    from .bench_workload import SglangBenchWorkloadReader

    register(SglangBenchWorkloadReader)
