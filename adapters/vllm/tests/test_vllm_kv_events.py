"""vllm-v1's KV-cache events: where vLLM's BlockPool emits them, fast paths equal to step by step,
nothing recorded (and nothing changed) unless asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate import (BlockRemoved, BlockStored, Clock, PluginError, Request, external_block_hash,
                      run_scheduler)
from tickgate.host.policy import load_policy
from tickgate.simulate import replay
from tickgate.replay.engine import build_scheduler
from tickgate_vllm.conformance import load_reference_workload, scheduler_options
from tickgate_vllm.v1.pool import BlockPool

REPO = Path(__file__).resolve().parents[3]
REF = REPO / "fixtures" / "vllm-reference"


def policy(tmp_path: Path, options: dict[str, Any], name: str = "p.yaml") -> Any:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "scheduler": {"name": "vllm-v1", "options": options}}))
    return load_policy(path)


def base(**over: Any) -> dict[str, Any]:
    opts = {"block_size": 4, "num_gpu_blocks": 33, "max_num_seqs": 8, "max_num_batched_tokens": 64,
            "enable_prefix_caching": True}
    opts.update(over)
    return opts


class Drain:
    """A sink that drains the scheduler's events after each record: (tick, span, events)."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler
        self.batches: list[tuple[int, int, list[Any]]] = []

    def record(self, r: Any) -> None:
        events = self.scheduler.drain_kv_events()
        if events:
            self.batches.append((r.tick, r.span, events))

    def outcome(self, o: Any) -> None:
        pass

    def arrival(self, r: Any) -> None:
        pass


def run_events(pol: Any, requests: list[Request]) -> tuple[Any, list[tuple[int, int, list[Any]]]]:
    clock = Clock()
    scheduler, _ = build_scheduler(pol, clock)
    scheduler.enable_kv_events()
    sink = Drain(scheduler)
    run_scheduler(requests, scheduler, clock, [sink])
    return scheduler, sink.batches


def flat(batches: list[tuple[int, int, list[Any]]]) -> list[Any]:
    return [e for _, _, events in batches for e in events]


def test_events_where_vllm_emits_them(tmp_path: Path) -> None:
    bs = 4
    prompt = tuple(range(100, 108))  # two full blocks
    a = Request(id="a", prompt_tokens=8, max_output_tokens=6, arrival_tick=0, prompt_token_ids=prompt)
    b = Request(id="b", prompt_tokens=8, max_output_tokens=2, arrival_tick=20, prompt_token_ids=prompt)
    scheduler, batches = run_events(policy(tmp_path, base(max_span=1)), [a, b])  # one record per step
    h = scheduler.prompt_block_hashes(a)
    assert len(h) == 2 and h == scheduler.prompt_block_hashes(b)
    own = external_block_hash((0, 2))  # a's third block: its own tokens (prompt tail + outputs)
    assert batches == [
        # a's prefill registers both prompt blocks (cache_full_blocks: one event, no parent)
        (0, 1, [BlockStored((h[0], h[1]), None, 8, bs)]),
        # a's 4th decode step computes token 11: block 2 is full (a's own hash, parent block 1)
        (4, 1, [BlockStored((own,), h[1], 4, bs)]),
        # b hits one block (at most num_tokens - 1 tokens), recomputes block 1: stored again, as
        # vLLM stores duplicates; nothing was evicted (the pool is large)
        (20, 1, [BlockStored((h[1],), h[0], 4, bs)]),
    ]
    assert scheduler.drain_kv_events() == []
    _, fast = run_events(policy(tmp_path, base(), "fast.yaml"), [a, b])
    assert (1, 4, [BlockStored((own,), h[1], 4, bs)]) in fast  # inside a span: the span's batch
    assert flat(fast) == flat(batches)


def test_eviction_on_reuse_is_block_removed(tmp_path: Path) -> None:
    # 4 usable blocks: b's blocks can only come from a's cached ones, oldest freed first
    a = Request(id="a", prompt_tokens=8, max_output_tokens=1, arrival_tick=0,
                prompt_token_ids=tuple(range(8)))
    b = Request(id="b", prompt_tokens=12, max_output_tokens=1, arrival_tick=5,
                prompt_token_ids=tuple(range(50, 62)))
    scheduler, batches = run_events(policy(tmp_path, base(num_gpu_blocks=5)), [a, b])
    ha, hb = scheduler.prompt_block_hashes(a), scheduler.prompt_block_hashes(b)
    assert batches[0] == (0, 1, [BlockStored(tuple(ha), None, 8, 4)])
    # a freed its blocks tail first: block 1 then block 0 went to the back of the free queue, after
    # the anonymous ones; b takes 3 blocks: two never used, then a's block 1 (evicted first)
    assert batches[1] == (5, 1, [BlockRemoved((ha[1],)), BlockStored(tuple(hb), None, 12, 4)])
    assert len(batches) == 2


def test_without_prefix_caching_nothing_is_emitted(tmp_path: Path) -> None:
    reqs = [Request(id=f"r{i}", prompt_tokens=9, max_output_tokens=5, arrival_tick=i) for i in range(4)]
    scheduler, batches = run_events(policy(tmp_path, base(enable_prefix_caching=False)), reqs)
    assert batches == [] and scheduler.prompt_block_hashes(reqs[0]) == []


def test_enable_twice_or_late_is_refused(tmp_path: Path) -> None:
    clock = Clock()
    scheduler, _ = build_scheduler(policy(tmp_path, base()), clock)
    scheduler.enable_kv_events()
    with pytest.raises(PluginError, match="twice"):
        scheduler.enable_kv_events()
    scheduler, _ = build_scheduler(policy(tmp_path, base()), clock)
    run_scheduler([Request(id="a", prompt_tokens=5, max_output_tokens=2)], scheduler, clock, [])
    with pytest.raises(PluginError, match="before the first step"):
        scheduler.enable_kv_events()


def test_not_enabled_means_the_plain_pool_and_methods(tmp_path: Path) -> None:
    scheduler, _ = build_scheduler(policy(tmp_path, base()), Clock())
    assert type(scheduler.pool) is BlockPool
    assert "_cache" not in vars(scheduler) and "_apply_span" not in vars(scheduler)
    assert scheduler.drain_kv_events() == []


@pytest.mark.parametrize("name", ["prefix-fcfs", "prefix-priority-evict", "prefix-no-chunked-pressure",
                                  "pressure-preempt-fcfs", "max-model-len-cap"])
def test_recording_changes_no_decision_and_fast_equals_slow(tmp_path: Path, name: str) -> None:
    requests, config = load_reference_workload(REF / f"{name}.workload.json", None)
    opts = {**scheduler_options(config), "enable_prefix_caching": True}
    plain = replay(requests, policy(tmp_path, opts, "plain.yaml"))
    _, fast = run_events(policy(tmp_path, opts, "fast.yaml"), requests)
    _, slow = run_events(policy(tmp_path, {**opts, "max_span": 1}, "slow.yaml"), requests)
    assert flat(fast) == flat(slow) and flat(fast)
    assert all(span == 1 for _, span, _ in slow)
    out = tmp_path / "e.msgpack"
    recorded = replay(requests, policy(tmp_path, opts, "plain.yaml"), kv_events_path=out)
    assert recorded.pop("kv_events")["blocks_stored"] == sum(len(e.block_hashes) for e in flat(fast)
                                                             if type(e) is BlockStored)
    assert recorded == plain


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 30), st.integers(0, 6), st.integers(0, 3)),
                min_size=1, max_size=12),
       st.integers(12, 40), st.sampled_from(["fcfs", "priority"]))
def test_spans_emit_the_step_by_step_stream(tmp_path_factory: Any, shapes: list[tuple[int, int, int, int]],
                                            blocks: int, order: str) -> None:
    """Random shared-prefix workloads under a pool small enough to evict and preempt: the
    fast paths (spans) give exactly the events of single steps, in the same order."""
    tmp = tmp_path_factory.mktemp("kv")
    requests = []
    tick = 0
    for i, (prompt, out, gap, family) in enumerate(shapes):
        tick += gap
        ids = tuple(range(family * 1000, family * 1000 + prompt))  # prompts of one family share prefixes
        requests.append(Request(id=f"r{i}", prompt_tokens=prompt, max_output_tokens=out, arrival_tick=tick,
                                prompt_token_ids=ids, priority=i % 3))
    opts = base(num_gpu_blocks=blocks, max_num_batched_tokens=32, policy=order)
    _, fast = run_events(policy(tmp, opts, "fast.yaml"), requests)
    _, slow = run_events(policy(tmp, {**opts, "max_span": 1}, "slow.yaml"), requests)
    assert flat(fast) == flat(slow)
