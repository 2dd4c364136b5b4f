"""Scenario tests of the ``trtllm`` scheduler mirror.

Each test encodes one documented TensorRT-LLM behaviour; the docstring names
the source (paths in the NVIDIA/TensorRT-LLM repository).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tickgate import InputError
from tickgate import Request
from tickgate.host.registry import get_registry
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.workload.sources import open_requests
from tickgate.workload.format import read_workload
from tickgate_trtllm.micro_batch import micro_batch
from trtllm_helpers import outcome, run

REPO = Path(__file__).resolve().parents[3]
AZURE = REPO / "fixtures" / "realdata" / "traces" / "AzureLLMInferenceTrace_code.csv"
PRESETS = sorted((REPO / "policies").glob("trtllm-*.yaml"))


def req(rid: str, prompt: int, out: int, tick: int = 0) -> Request:
    return Request(id=rid, prompt_tokens=prompt, max_output_tokens=out, arrival_tick=tick)


def base(**kw: Any) -> dict[str, Any]:
    return {"tokens_per_block": 16, "kv_cache_blocks": 100, "max_num_tokens": 1000, **kw}


def test_registered_through_the_adapter_entry_point() -> None:
    assert get_registry().get("scheduler", "trtllm").distribution == "tickgate-trtllm"


def test_admission_section_is_refused_and_pool_size_must_be_given_once(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="capacity_scheduler_policy"):
        run(tmp_path, base(), [req("a", 10, 2)], extra={"admission": {"name": "priority-fcfs"}})
    with pytest.raises(InputError, match="exactly one"):
        run(tmp_path, {"kv_cache_blocks": 10, "kv_cache_max_tokens": 320}, [req("a", 10, 2)])


def test_guaranteed_no_evict_reserves_blocks_to_completion(tmp_path: Path) -> None:
    """capacityScheduler.cpp GuaranteedNoEvictScheduler: generation requests
    keep their blocks to completion set aside; a context is scheduled only if
    its own blocks to completion fit in what is left; nothing is paused."""
    # each request needs ceil((64 + 96) / 16) = 10 blocks to completion; 15 blocks hold one
    reqs = [req("a", 64, 96), req("b", 64, 96)]
    rep = run(tmp_path, base(kv_cache_blocks=15), reqs)
    assert outcome(rep, "b")["admitted_tick"] == outcome(rep, "a")["finished_tick"] + 1
    assert rep["requests"]["preemptions"] == 0
    # MAX_UTILIZATION starts both at once (4 prompt blocks each) and pauses when KV runs out
    rep = run(tmp_path, base(kv_cache_blocks=15, capacity_scheduler_policy="MAX_UTILIZATION"), reqs)
    assert outcome(rep, "b")["admitted_tick"] == 0
    assert rep["scheduler"]["pauses"] >= 1
    assert rep["summary"]["completed_requests"] == 2 and rep["summary"]["final_kv_pages"] == 0


def test_guaranteed_no_evict_stops_at_the_first_context_that_does_not_fit(tmp_path: Path) -> None:
    """GuaranteedNoEvictScheduler: 'If one requests fails to be scheduled, break'."""
    reqs = [req("a", 64, 96), req("big", 200, 100), req("small", 16, 2)]
    rep = run(tmp_path, base(kv_cache_blocks=25), reqs)  # a: 10 blocks, big: 19, small: 2
    assert rep["ticks"][0]["admitted"] == ["a"]
    assert outcome(rep, "small")["admitted_tick"] >= outcome(rep, "big")["admitted_tick"]


def test_max_utilization_pauses_the_last_started_request(tmp_path: Path) -> None:
    """MaxUtilizationScheduler: when a request's next-step blocks do not fit,
    the last started request (from the end of the active list) is paused and
    its blocks freed; a paused request later runs its context again over its
    prompt plus the tokens it generated (LlmRequest::pause)."""
    reqs = [req("a", 32, 60), req("b", 32, 60), req("c", 32, 60)]
    rep = run(tmp_path, base(kv_cache_blocks=9, capacity_scheduler_policy="MAX_UTILIZATION"), reqs)
    first_pause = next(t for t in rep["ticks"] if t["preempted"])
    assert first_pause["preempted"] == ["c"]
    resumed = next(t for t in rep["ticks"] if t["tick"] > first_pause["tick"] and "c" in t["admitted"])
    c_chunk = resumed["detail"]["context_chunks"]["c"]
    assert c_chunk > 32  # prompt plus the generated tokens
    assert outcome(rep, "c")["output_tokens"] == 60 and outcome(rep, "c")["preemptions"] >= 1
    assert rep["summary"]["final_kv_pages"] == 0


def test_static_batch_starts_no_context_while_a_batch_generates(tmp_path: Path) -> None:
    """StaticBatchScheduler: pending requests are only added when no request
    is in progress (impl<true>: 'scheduledRequests.size() == 0')."""
    reqs = [req("a", 16, 5), req("b", 16, 8), req("c", 16, 2, tick=1)]
    rep = run(tmp_path, base(capacity_scheduler_policy="STATIC_BATCH"), reqs)
    c = outcome(rep, "c")
    assert c["admitted_tick"] == outcome(rep, "b")["finished_tick"] + 1
    rep = run(tmp_path, base(), reqs)  # in-flight batching starts c at once
    assert outcome(rep, "c")["admitted_tick"] == 1


def test_context_and_generation_share_a_step(tmp_path: Path) -> None:
    """In-flight batching: microBatchScheduler.cpp returns context and
    generation requests for the same step."""
    rep = run(tmp_path, base(), [req("a", 16, 5), req("b", 40, 3, tick=2)])
    t2 = rep["ticks"][2]
    assert t2["admitted"] == ["b"] and t2["decoded"] == ["a"]
    assert t2["prefill_tokens"] == 40 and t2["detail"]["batch_tokens"] == 41


def test_max_num_tokens_ends_the_micro_batch_without_chunking(tmp_path: Path) -> None:
    """MicroBatchScheduler: without chunking a context costs its whole prompt
    and 'batchNumTokens + reqNumTokens > maxNumTokensRuntime' breaks the walk."""
    reqs = [req("a", 60, 2), req("b", 60, 2), req("c", 10, 2)]
    rep = run(tmp_path, base(max_num_tokens=100), reqs)
    assert rep["ticks"][0]["admitted"] == ["a"]  # b does not fit, and c may not overtake it
    rep = run(tmp_path, base(max_num_tokens=100, max_batch_size=1), [req("a", 10, 3), req("b", 10, 3)])
    assert all(len(t["admitted"]) + len(t["decoded"]) <= 1 for t in rep["ticks"])


def test_chunked_context_first_come_first_served_cuts_block_multiples(tmp_path: Path) -> None:
    """setCtxRequestsChunkSize<kFIRST_COME_FIRST_SERVED>: each context takes
    min(remaining, capacity) rounded down to chunkUnitSize unless it is the
    whole remainder; the last chunk emits the first token."""
    rep = run(tmp_path, base(max_num_tokens=100, enable_chunked_context=True), [req("a", 250, 2)])
    chunks = [t["detail"]["context_chunks"]["a"] for t in rep["ticks"] if t["prefill_tokens"]]
    assert chunks == [96, 96, 58]
    assert outcome(rep, "a")["first_token_tick"] == 2
    assert rep["scheduler"]["context_chunks"] == 2


class _Ctx:
    in_generation = False

    def __init__(self, remaining: int) -> None:
        self.remaining = remaining

    def context_remaining(self) -> int:
        return self.remaining


def test_equal_progress_chunking_deals_one_unit_each_round_robin() -> None:
    """setCtxRequestsChunkSize<kEQUAL_PROGRESS>: chunk units are handed out
    one per request per round until the token capacity is used."""
    a, b = _Ctx(100), _Ctx(20)
    contexts, _ = micro_batch([a, b], max_batch_size=10, max_num_tokens=64, chunking="EQUAL_PROGRESS",
                              chunk_unit=16)
    # round 1: 16 + 16; round 2: a 32, b its last 4 (52); round 3: a's next unit would pass 64
    assert [(r.remaining, s) for r, s in contexts] == [(100, 32), (20, 20)]
    fcfs, _ = micro_batch([a, b], max_batch_size=10, max_num_tokens=64, chunking="FIRST_COME_FIRST_SERVED",
                          chunk_unit=16)
    assert [s for _, s in fcfs] == [64]


def test_requests_that_can_never_run_are_rejected(tmp_path: Path) -> None:
    rep = run(tmp_path, base(kv_cache_blocks=4), [req("a", 100, 10)])
    assert outcome(rep, "a")["status"] == "rejected"
    rep = run(tmp_path, base(max_num_tokens=50), [req("b", 60, 1)])
    assert "max_num_tokens" in outcome(rep, "b")["reason"]


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_presets_replay_the_fixtures_with_latency(preset: Path) -> None:
    for workload in ("workload.json", "scenarios/shared-prefix.json", "scenarios/kv-pressure.json"):
        rep = replay(read_workload(REPO / "fixtures" / workload).requests, load_policy(preset))
        assert rep["summary"]["completed_requests"] == rep["summary"]["request_count"], workload
        assert rep["latency"]["ttft_ms"]["p95"] > 0 and rep["summary"]["final_kv_pages"] == 0


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.stem)
def test_presets_replay_an_azure_code_sample(preset: Path) -> None:
    if not AZURE.exists():
        pytest.skip("Azure code trace not copied into fixtures/realdata")
    stream, _ = open_requests(AZURE, "azure", limit=150)
    rep = replay(stream, load_policy(preset))
    assert rep["summary"]["completed_requests"] + rep["requests"]["rejected"] == 150
    lat = rep["latency"]
    assert lat["e2e_ms"]["p99"] >= lat["ttft_ms"]["p99"] > 0 and lat["tpot_ms"]["p50"] > 0
