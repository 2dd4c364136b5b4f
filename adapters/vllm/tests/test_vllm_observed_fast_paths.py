"""The observer lines of the fast paths (v1.observe) are exactly the full step's.

With an observer attached, the spans and the decode group hand it one line per
engine step they cover, expanded from the state before them; ``max_span: 1``
runs the full step at every step, which builds its line as it goes. Both are
compared here line for line, every field (the running requests' computed
tokens too, which the conformance check leaves out), on seeded workloads drawn
by tickgate's generator and on random small traffic.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate import InputError, Request, observe_mirror
from tickgate.workload.generate import LengthRange, generate

#: the harness's defaults (conformance.HARNESS_DEFAULTS), a small pool
BASE = {"block_size": 16, "num_gpu_blocks": 160, "max_num_seqs": 24, "max_num_batched_tokens": 512,
        "enable_chunked_prefill": True, "enable_prefix_caching": False, "policy": "fcfs",
        "long_prefill_token_threshold": 0, "max_model_len": 2048, "watermark": 0.0,
        "scheduler_reserve_full_isl": True}

#: one per knob the fast paths depend on (policy, caching with preemption, chunking, caps)
CONFIGS = {
    "fcfs": {},
    "fcfs-pressure-caching": {"num_gpu_blocks": 90, "enable_prefix_caching": True, "max_num_batched_tokens": 256},
    "fcfs-no-chunked-maxlen": {"enable_chunked_prefill": False, "max_num_batched_tokens": 768,
                               "max_model_len": 768},
    "priority-pressure": {"policy": "priority", "num_gpu_blocks": 90, "max_num_batched_tokens": 256},
    "priority-caching": {"policy": "priority", "enable_prefix_caching": True},
    "block8-threshold-watermark": {"block_size": 8, "num_gpu_blocks": 300, "long_prefill_token_threshold": 64,
                                   "watermark": 0.05, "scheduler_reserve_full_isl": False},
    "seqs-bound": {"max_num_seqs": 4, "num_gpu_blocks": 1000},
}


def workload(seed: int, n: int = 90) -> list[Request]:
    """``n`` requests with tickgate's generator's lengths and send times (seeded),
    on steps of 40 ms, prompts from three shared prefixes or none, some duplicated."""
    rng = random.Random(seed)
    _, requests = generate(n, LengthRange(8, 400), LengthRange(4, 260), seed=seed, rate=12.0)
    families = [[rng.randrange(50_000) for _ in range(rng.randint(16, 200))] for _ in range(3)]
    out: list[Request] = []
    for r in requests:
        family = rng.randrange(4)
        prompt = families[family][:r.prompt_tokens] if family < 3 else []
        prompt = prompt + [rng.randrange(50_000) for _ in range(r.prompt_tokens - len(prompt))]
        if out and rng.random() < 0.15:
            prompt = list(out[-1].prompt_token_ids or prompt)
        assert r.arrival_ms is not None
        out.append(attrs.evolve(r, prompt_tokens=len(prompt), prompt_token_ids=tuple(prompt), prefix_blocks=None,
                                arrival_ms=None, arrival_tick=int(r.arrival_ms // 40)))
    return out


def observed(requests: list[Request], options: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The observer's lines and how many of them the fast paths' expansions built."""
    mirrors: list[Any] = []
    lines = observe_mirror("vllm-v1", options, requests, "vLLM", built=mirrors.append)
    return lines, mirrors[0].observed_fast_steps


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_expanded_fast_path_lines_equal_the_full_steps_on_generated_workloads(config: str, seed: int) -> None:
    requests = workload(seed)
    options = {**BASE, **CONFIGS[config]}
    fast, expanded = observed(requests, options)
    slow, none = observed(requests, {**options, "max_span": 1})
    assert none == 0
    assert len(fast) == len(slow) > len(requests)
    first = next((i for i, (a, b) in enumerate(zip(fast, slow)) if a != b), None)
    assert first is None, f"step {slow[first]['step']}: fast {fast[first]} vs full {slow[first]}"
    assert expanded > len(fast) // 3  # the fast paths took a good share of the steps


_request = st.tuples(st.integers(1, 60), st.integers(1, 40), st.integers(0, 3), st.integers(0, 6),
                     st.integers(0, 3))  # prompt, output, priority, arrival gap, prefix family (3: none)


@settings(max_examples=80, deadline=None)
@given(reqs=st.lists(_request, min_size=1, max_size=14), blocks=st.integers(6, 40),
       caching=st.booleans(), policy=st.sampled_from(["fcfs", "priority"]),
       maxlen=st.sampled_from([None, 50, 90]), threshold=st.sampled_from([0, 8]))
def test_expanded_fast_path_lines_equal_the_full_steps_on_random_traffic(
        reqs: list[tuple[int, int, int, int, int]], blocks: int, caching: bool, policy: str,
        maxlen: int | None, threshold: int) -> None:
    """Small pools that preempt (resumed requests keep the per-request spans), shared
    prefixes, output caps, arrivals inside spans. Chunked prefill stays on: without it
    a preempted request longer than the budget stalls vLLM too (the generated
    workloads cover it)."""
    requests, at = [], 0
    for i, (prompt, out, prio, gap, family) in enumerate(reqs):
        at += gap
        ids = [family * 1000 + t for t in range(prompt)] if family < 3 else [5000 + 100 * i + t for t in range(prompt)]
        requests.append(Request(id=f"r{i}", prompt_tokens=prompt, max_output_tokens=out, priority=prio,
                                arrival_tick=at, prompt_token_ids=tuple(ids)))
    options: dict[str, Any] = {"block_size": 4, "num_gpu_blocks": blocks, "max_num_seqs": 8,
                               "max_num_batched_tokens": 64, "enable_prefix_caching": caching,
                               "policy": policy,
                               "long_prefill_token_threshold": threshold}
    if maxlen is not None:
        options["max_model_len"] = maxlen
    try:
        slow, _ = observed(requests, {**options, "max_span": 1})
    except InputError:
        return  # a request vLLM would refuse, refused alike either way
    fast, _ = observed(requests, options)
    assert fast == slow
