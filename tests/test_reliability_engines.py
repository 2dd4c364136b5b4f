"""Engine invariants for every scheduler (hypothesis): the engine mirrors
(vllm-v1, sglang, trtllm) and the seed scheduler under each admission policy,
over small random workloads and small random option sets.

For every replay: KV use never exceeds capacity, every page is returned at
the end, every request ends exactly once (completed with all its output, or
rejected with a reason), the run finishes (no request starves: the engine
loop's stall guard would raise), and the fingerprint is the same when the
same input is replayed again.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import POLICIES
from tickgate.replay.engine import build_scheduler, run
from tickgate.interfaces import Clock
from tickgate.interfaces.model import Request, RequestOutcome, TickRecord
from tickgate.host.policy import load_policy
from tickgate.replay.fingerprint import FingerprintSink

SETTINGS = settings(max_examples=15, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
BLOCK = 16  # tokens per prefix block id in generated workloads


class Recorder:
    def __init__(self) -> None:
        self.records: list[TickRecord] = []
        self.outcomes: list[RequestOutcome] = []

    def arrival(self, request: Request) -> None:
        pass

    def record(self, record: TickRecord) -> None:
        self.records.append(record)

    def outcome(self, outcome: RequestOutcome) -> None:
        self.outcomes.append(outcome)


@st.composite
def workloads(draw: Any) -> list[Request]:
    n = draw(st.integers(1, 16))
    arrivals = sorted(draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)))
    out = []
    for i in range(n):
        prompt = draw(st.integers(1, 200))
        shared = draw(st.integers(0, 2))  # a few shared prefixes for the prefix caches
        blocks = -(-prompt // BLOCK)
        out.append(Request(
            id=f"r{i:02d}", prompt_tokens=prompt, max_output_tokens=draw(st.integers(1, 12)),
            priority=draw(st.integers(0, 2)), arrival_tick=arrivals[i],
            tenant=draw(st.sampled_from([None, "gold", "silver"])),
            lane=draw(st.sampled_from([None, "realtime", "standard", "bulk"])),
            deadline_tick=draw(st.one_of(st.none(), st.integers(arrivals[i] + 1, arrivals[i] + 200))),
            prefix_blocks=tuple(shared * 1000 + b for b in range(blocks)),
        ))
    return out


def _as_vllm_accepts(options: dict[str, Any]) -> dict[str, Any]:
    """vLLM refuses chunked prefill off with a step budget below max_model_len: cap the model
    length at the budget there (longer prompts are then rejected, with a reason)."""
    if not options["enable_chunked_prefill"]:
        return {**options, "max_model_len": options["max_num_batched_tokens"]}
    return options


def seed_policy(admission: str) -> Any:
    """A shipped seed policy with random cache geometry."""
    file = {"priority-fcfs": "default", "aimd": "aimd", "deadline-edf": "deadline", "fair-share": "fair-share",
            "sla-lanes": "lanes", "lpm": "lpm"}[admission]
    base = copy.deepcopy(dict(load_policy(POLICIES / f"{file}.yaml").data))
    return st.fixed_dictionaries({
        "page_size": st.sampled_from([16]) if admission == "lpm" else st.sampled_from([4, 8, 16]),
        "kv_pages": st.integers(2, 40), "prefill_budget": st.integers(8, 256),
        "decode_batch_width": st.integers(1, 4), "aging_ticks": st.sampled_from([0, 4, 10**6]),
    }).map(lambda opts: {**base, "scheduler": {"name": "seed", "options": opts}})


ENGINE_POLICIES: dict[str, Any] = {
    "vllm-v1": st.fixed_dictionaries({
        "block_size": st.sampled_from([4, 16]), "num_gpu_blocks": st.integers(2, 64),
        "max_num_seqs": st.integers(1, 8), "max_num_batched_tokens": st.sampled_from([64, 256, 2048]),
        "enable_chunked_prefill": st.booleans(), "enable_prefix_caching": st.booleans(),
        "policy": st.sampled_from(["fcfs", "priority"]),
    }).map(_as_vllm_accepts),
    "sglang": st.fixed_dictionaries({
        "page_size": st.sampled_from([1, 16]), "max_total_tokens": st.sampled_from([64, 512, 4096]),
        "max_running_requests": st.integers(1, 8), "chunked_prefill_size": st.sampled_from([-1, 64, 2048]),
        "schedule_policy": st.sampled_from(["fcfs", "lpm", "lof", "dfs-weight"]),
        "prefix_block_size": st.just(BLOCK),
    }),
    "trtllm": st.fixed_dictionaries({
        "tokens_per_block": st.sampled_from([8, 32]), "kv_cache_max_tokens": st.sampled_from([64, 512, 4096]),
        "max_batch_size": st.integers(1, 8), "max_num_tokens": st.sampled_from([256, 2048]),
        "capacity_scheduler_policy": st.sampled_from(["GUARANTEED_NO_EVICT", "MAX_UTILIZATION", "STATIC_BATCH"]),
        "enable_chunked_context": st.booleans(),
    }),
}


def engine_policy(name: str) -> Any:
    return ENGINE_POLICIES[name].map(lambda opts: {"version": 1, "scheduler": {"name": name, "options": opts}})


def replay(policy_doc: dict[str, Any], requests: list[Request], tmp: Path) -> tuple[Recorder, Any, str]:
    path = tmp / "policy.yaml"
    path.write_text(json.dumps(policy_doc))  # YAML 1.2 reads JSON
    policy = load_policy(path)
    clock = Clock()
    scheduler, _ = build_scheduler(policy, clock, prefix_block_size=BLOCK)
    rec, fp = Recorder(), FingerprintSink()
    run(requests, scheduler, clock, [rec, fp], timed=False, max_ticks=200_000)
    return rec, scheduler, fp.hexdigest()


def check_invariants(policy_doc: dict[str, Any], requests: list[Request], tmp: Path) -> None:
    rec, scheduler, fingerprint = replay(policy_doc, requests, tmp)
    capacity = scheduler.kv_capacity_pages()
    over = [r.tick for r in rec.records if r.kv_pages_used > capacity]
    assert over == [], f"KV use above capacity {capacity} at ticks {over[:5]}"
    assert scheduler.kv_used_pages() == 0, "pages still held after every request ended"
    ids = [o.id for o in rec.outcomes]
    assert sorted(ids) == sorted(q.id for q in requests), "a request was lost or ended twice"
    wanted = {q.id: q.max_output_tokens for q in requests}
    for o in rec.outcomes:
        assert o.status in ("completed", "rejected"), o
        if o.status == "rejected":
            assert o.reason, f"{o.id} rejected without a reason"
        elif set(o.flags) & {"max_new_tokens_clipped", "length_capped"}:
            assert 0 < o.output_tokens < wanted[o.id], o  # the engine's length limit, flagged
        else:
            assert o.output_tokens == wanted[o.id], o
    assert replay(policy_doc, list(requests), tmp)[2] == fingerprint, "same input, different fingerprint"


@pytest.mark.parametrize("name", sorted(ENGINE_POLICIES))
def test_engine_scheduler_invariants(name: str, tmp_path: Path) -> None:
    @SETTINGS
    @given(engine_policy(name), workloads())
    def check(policy_doc: dict[str, Any], requests: list[Request]) -> None:
        check_invariants(policy_doc, requests, tmp_path)

    check()


@pytest.mark.parametrize("admission", ["priority-fcfs", "aimd", "deadline-edf", "fair-share", "sla-lanes", "lpm"])
def test_seed_invariants_under_each_admission_policy(admission: str, tmp_path: Path) -> None:
    @SETTINGS
    @given(seed_policy(admission), workloads())
    def check(policy_doc: dict[str, Any], requests: list[Request]) -> None:
        check_invariants(policy_doc, requests, tmp_path)

    check()


def test_every_scheduler_and_admission_policy_is_covered() -> None:
    from tickgate.host.registry import get_registry

    registry = get_registry()
    assert set(registry.names("scheduler")) == {"seed", *ENGINE_POLICIES}
    assert set(registry.names("admission")) == {"priority-fcfs", "aimd", "deadline-edf", "fair-share",
                                                "sla-lanes", "lpm"}
