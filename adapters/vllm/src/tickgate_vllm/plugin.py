"""Entry point ``vllm = tickgate_vllm.plugin``: this adapter's readers of what
vLLM and its bench client write (bench results, /metrics, SSE streams, KV
events), its streaming-evidence parser and the workload reader of a bench run
(``tickgate import vllm-bench``).

Implementation modules are imported inside the hooks (lazy start-up).
"""

from __future__ import annotations

from typing import Any

from tickgate import hookimpl


@hookimpl
def register_backend_mirrors(register: Any) -> None:
    from .bench import VllmBenchMirror
    from .kv_events import VllmKvEventsMirror
    from .metrics import VllmMetricsMirror
    from .sse import VllmSseMirror

    register(VllmBenchMirror)
    register(VllmMetricsMirror)
    register(VllmSseMirror)
    register(VllmKvEventsMirror)


@hookimpl
def register_evidence_parsers(register: Any) -> None:
    from .sse import VllmSseEvidence

    register(VllmSseEvidence)


@hookimpl
def register_workload_readers(register: Any) -> None:
    from .bench_workload import VllmBenchWorkloadReader

    register(VllmBenchWorkloadReader)
