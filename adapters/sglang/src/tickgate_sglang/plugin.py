"""Entry point ``sglang = tickgate_sglang.plugin``: this adapter's readers of
what SGLang and its bench client write (bench_serving JSONL, /metrics, SSE
streams, KV events) and its streaming-evidence parser.

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
