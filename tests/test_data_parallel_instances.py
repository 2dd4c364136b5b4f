"""``supports_data_parallel`` (issue 21): a fleet runs data-parallel ranks as independent
instances of one scheduler class in one process. Two instances stepped in turn (one step
of each, alternately, each on its own clock) make exactly the records and outcomes each
makes alone: no state is shared between instances (class-level caches, module globals)."""

from __future__ import annotations

from typing import Any, Iterator

import attrs
import pytest
from conftest import POLICIES

from tickgate import Request
from tickgate.interfaces import Clock, Horizon, optional_attribute
from tickgate.host.policy import load_policy
from tickgate.replay.engine import build_scheduler
from tickgate.replay.fingerprint import canonical_body

PRESETS = ["vllm-v1-bench.yaml", "sglang-default.yaml", "trtllm-max-utilization.yaml"]


def workload(seed: int, n: int = 60) -> list[Request]:
    """Deterministic traffic with shared prefixes, arrivals in ms."""
    out, at = [], 0.0
    for i in range(n):
        at += 3.0 + (seed * 7 + i * 13) % 40
        prompt = 40 + (seed * 31 + i * 57) % 900
        family = (seed + i) % 3
        ids = tuple(range(family * 1000, family * 1000 + prompt // 16 + 1))
        out.append(Request(id=f"s{seed}-{i}", prompt_tokens=prompt,
                           max_output_tokens=5 + (i * 11 + seed) % 120,
                           arrival_ms=at, prefix_blocks=ids))
    return out


def steps(sched: Any, clock: Clock, requests: list[Request], log: list[Any]) -> Iterator[None]:
    """The engine loop for one instance, yielding after every step."""
    i = 0
    while True:
        if not sched.has_work():
            if i == len(requests):
                return
            if requests[i].arrival_ms > clock.now_ms:
                clock.idle_ms += requests[i].arrival_ms - clock.now_ms
                clock.now_ms = requests[i].arrival_ms
        while i < len(requests) and requests[i].arrival_ms <= clock.now_ms:
            sched.add(requests[i])
            i += 1
        horizon = Horizon(max_ticks=10**9, until_ms=requests[i].arrival_ms if i < len(requests) else None)
        if not sched.has_work():
            continue
        record = sched.step(horizon)
        log.append((record.tick, record.span, record.duration_ms, canonical_body(record)))
        log.extend(attrs.astuple(o) for o in sched.pop_outcomes())
        clock.tick += record.span
        clock.now_ms += record.duration_ms
        yield


def run(preset: str, loads: list[list[Request]], interleaved: bool) -> list[list[Any]]:
    policy = load_policy(POLICIES / preset)
    logs: list[list[Any]] = [[] for _ in loads]
    gens = []
    for load, log in zip(loads, logs):
        clock = Clock()
        sched, _ = build_scheduler(policy, clock, prefix_block_size=16)
        assert optional_attribute(sched, "supports_data_parallel") is True
        gens.append(steps(sched, clock, load, log))
    if interleaved:
        while gens:
            gens = [g for g in gens if next(g, StopIteration) is not StopIteration]
    else:
        for g in gens:
            for _ in g:
                pass
    return logs


@pytest.mark.parametrize("preset", PRESETS)
def test_ranks_stepped_in_turn_are_independent(preset: str) -> None:
    loads = [workload(1), workload(2)]
    alone = run(preset, loads, interleaved=False)
    assert run(preset, loads, interleaved=True) == alone
    assert all(len(log) > 60 for log in alone)
