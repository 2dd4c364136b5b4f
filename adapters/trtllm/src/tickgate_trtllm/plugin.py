"""Entry point ``trtllm = tickgate_trtllm.plugin``: this adapter's readers of
what TensorRT-LLM deployments write (trtllm-bench reports, executor iteration
stats, Triton ``nv_trt_llm_*`` and ``trtllm_`` Prometheus metrics).

Implementation modules are imported inside the hooks (lazy start-up).
"""

from __future__ import annotations

from typing import Any

from tickgate import hookimpl


@hookimpl
def register_backend_mirrors(register: Any) -> None:
    from .bench import TrtllmBenchMirror
    from .iteration_stats import TrtllmIterationStatsMirror
    from .metrics import TritonTrtllmMetricsMirror, TrtllmMetricsMirror

    register(TrtllmBenchMirror)
    register(TrtllmIterationStatsMirror)
    register(TritonTrtllmMetricsMirror)
    register(TrtllmMetricsMirror)
