"""The in-tree adapters and built-ins run the same contract kit a third party
runs (tickgate.testing): registration, options schema, determinism across
hash seeds, clean errors on bad input, round trip through the neutral schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, POLICIES

pytest.register_assert_rewrite("tickgate.testing")  # before the import: the kit's asserts explain failures

from tickgate.testing import (AutoscalerContract, AdmissionPolicyContract, BackendMirrorContract, GateSignalContract,  # noqa: E402
                              RouterContract, SchedulerContract, TimingModelContract, WorkloadReaderContract)

pytest_plugins = ["tickgate.testing"]


class TestSeedScheduler(SchedulerContract):
    plugin_name = "seed"
    distribution = "tickgate"
    policy = POLICIES / "default.yaml"


class TestVllmV1Scheduler(SchedulerContract):
    plugin_name = "vllm-v1"
    distribution = "tickgate-vllm"
    policy = POLICIES / "vllm-v1-bench.yaml"


class TestSglangScheduler(SchedulerContract):
    plugin_name = "sglang"
    distribution = "tickgate-sglang"
    policy = POLICIES / "sglang-default.yaml"


class TestPriorityFcfs(AdmissionPolicyContract):
    plugin_name = "priority-fcfs"
    distribution = "tickgate"


class TestFairShare(AdmissionPolicyContract):
    plugin_name = "fair-share"
    distribution = "tickgate"
    options = {"weights": {"a": 3, "b": 1}}


class TestLinearTiming(TimingModelContract):
    plugin_name = "linear"
    distribution = "tickgate"
    options = {"fixed_ms": 4.0, "per_prefill_token_ms": 0.02, "per_decode_seq_ms": 0.15,
               "per_context_token_ms": 0.0002}


class TestRooflineTiming(TimingModelContract):
    plugin_name = "roofline"
    distribution = "tickgate"
    options = {"model": "llama-3.1-70b", "gpu": "H100-SXM-80GB", "tensor_parallel_size": 4, "engine": "vllm"}


class TestRoundRobinRouter(RouterContract):
    plugin_name = "round-robin"
    distribution = "tickgate"


class TestLeastLoadedRouter(RouterContract):
    plugin_name = "least-loaded"
    distribution = "tickgate"
    options = {"waiting_weight": 4}


class TestPowerOfTwoRouter(RouterContract):
    plugin_name = "power-of-two"
    distribution = "tickgate"


class TestSessionAffinityRouter(RouterContract):
    plugin_name = "session-affinity"
    distribution = "tickgate"


class TestPrefixAwareRouter(RouterContract):
    plugin_name = "prefix-aware"
    distribution = "tickgate"
    options = {"overlap_weight": 2}


class TestHpaAutoscaler(AutoscalerContract):
    plugin_name = "hpa"
    distribution = "tickgate"
    options = {"metrics": [{"name": "waiting", "target": 2}, {"name": "ttft_p95_ms", "target": 80}],
               "scale_down": {"stabilization_window_s": 0.02}}


class TestSloAutoscaler(AutoscalerContract):
    plugin_name = "slo"
    distribution = "tickgate"
    options = {"itl_ms": 6, "ttft_ms": 100, "scale_down_delay_s": 0.02}


class TestVllmBenchMirror(BackendMirrorContract):
    plugin_name = "vllm-bench"
    distribution = "tickgate-vllm"
    sample = FIXTURES / "realdata" / "vllm_bench" / "summary_result_benchmark_serving_2025-05.json"


class TestSglangBenchMirror(BackendMirrorContract):
    plugin_name = "sglang-bench"
    distribution = "tickgate-sglang"
    sample = FIXTURES / "realdata" / "sglang_bench" / "sglang_bench_serving_full_line_2025.jsonl"


class TestMooncakeReader(WorkloadReaderContract):
    plugin_name = "mooncake"
    distribution = "tickgate"

    def sample_path(self, tmp_path: Path) -> Path:
        """The first 40 lines of the real Mooncake conversation trace."""
        path = tmp_path / "mooncake-head.jsonl"
        if not path.exists():
            source = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
            with source.open(encoding="utf-8") as fh:
                path.write_text("".join(next(fh) for _ in range(40)), encoding="utf-8")
        return path


class TestErrorRateSignal(GateSignalContract):
    plugin_name = "error-rate"
    distribution = "tickgate"
    options = {"max_increase": 0.0}


class TestExpectedPerformanceSignal(GateSignalContract):
    """Registered by tickgate.timing (the replay sits above the gate); the kit's synthetic runs are
    not a client's run it can replay, so it holds on them (missing_evidence), never passes."""

    plugin_name = "expected-performance"
    distribution = "tickgate"
    options = {"deployment": str(FIXTURES / "calibrate" / "mock-server.yaml")}


class TestLatencyP95Signal(GateSignalContract):
    plugin_name = "latency-p95"
    distribution = "tickgate"
    options = {"threshold": 0.10}
