"""Invariants of the seed scheduler over random workloads and policies, and of the core value
types (hypothesis)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickgate.replay.engine import build_scheduler, run
from tickgate.interfaces import Clock
from tickgate.interfaces.model import Request, RequestOutcome, TickRecord, tick_record
from tickgate.host.registry import get_registry
from tickgate.host.policy import Policy, Selection
from tickgate.replay.fingerprint import FingerprintSink


def make_policy(page_size: int, kv_pages: int, budget: int, width: int, aging: int) -> Policy:
    registry = get_registry()
    options = {"page_size": page_size, "kv_pages": kv_pages, "prefill_budget": budget,
               "decode_batch_width": width, "aging_ticks": aging}
    return Policy(path="<test>", data={}, locations={},
                  selections={"scheduler": Selection(registry.get("scheduler", "seed"), options)},
                  timing=None, max_ticks=1_000_000)


class Recorder:
    def __init__(self) -> None:
        self.records: list[TickRecord] = []
        self.outcomes: list[RequestOutcome] = []
        self.arrivals: list[Request] = []

    def arrival(self, r: Request) -> None:
        self.arrivals.append(r)

    def record(self, r: TickRecord) -> None:
        self.records.append(r)

    def outcome(self, o: RequestOutcome) -> None:
        self.outcomes.append(o)


@st.composite
def workloads(draw: Any) -> list[Request]:
    n = draw(st.integers(1, 25))
    arrivals = sorted(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)))
    return [
        Request(id=f"r{i:02d}", prompt_tokens=draw(st.integers(1, 300)),
                max_output_tokens=draw(st.integers(1, 20)), priority=draw(st.integers(0, 2)),
                arrival_tick=arrivals[i])
        for i in range(n)
    ]


policies = st.tuples(st.sampled_from([4, 8, 16]), st.integers(2, 40), st.integers(8, 256),
                     st.integers(1, 4), st.sampled_from([0, 2, 8, 10**9]))


def replay(requests: list[Request], params: tuple[int, ...]) -> tuple[Recorder, Any, str]:
    clock = Clock()
    scheduler, _ = build_scheduler(make_policy(*params), clock)
    rec = Recorder()
    fp = FingerprintSink()
    run(requests, scheduler, clock, [rec, fp])
    return rec, scheduler, fp.hexdigest()


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(workloads(), policies)
def test_capacity_pages_and_outcomes(requests: list[Request], params: tuple[int, ...]) -> None:
    page_size, kv_pages, *_ = params
    rec, scheduler, _ = replay(requests, params)
    # used pages never exceed capacity; every page comes back
    assert all(r.kv_pages_used <= kv_pages for r in rec.records)
    assert scheduler.kv_used_pages() == 0
    assert sum(r.kv_pages_reserved for r in rec.records) == sum(
        -(-(q.prompt_tokens + q.max_output_tokens) // page_size)
        for q in requests if -(-(q.prompt_tokens + q.max_output_tokens) // page_size) <= kv_pages)
    # every request completes or is rejected with a reason, exactly once
    by_id = {o.id: o for o in rec.outcomes}
    assert len(by_id) == len(rec.outcomes) == len(requests)
    for q in requests:
        o = by_id[q.id]
        pages = -(-(q.prompt_tokens + q.max_output_tokens) // page_size)
        if pages > kv_pages:
            assert o.status == "rejected" and o.reason and str(kv_pages) in o.reason
        else:
            assert o.status == "completed" and o.output_tokens == q.max_output_tokens
            assert o.admitted_tick is not None and o.admitted_tick >= q.arrival_tick


@SETTINGS
@given(workloads(), policies)
def test_no_request_waits_while_it_would_fit(requests: list[Request], params: tuple[int, ...]) -> None:
    """After each step's admission, every request still waiting did not fit in what the
    step left free (pages, prefill budget) minus an aged request's claim."""
    page_size, kv_pages, budget, width, aging = params
    rec, _, _ = replay(requests, params)
    info = {q.id: q for q in requests}
    pages = {q.id: -(-(q.prompt_tokens + q.max_output_tokens) // page_size) for q in requests}
    waiting: dict[str, int] = {}  # id -> tick it joined
    arrivals = iter(sorted(requests, key=lambda q: q.arrival_tick))
    pending = next(arrivals, None)
    for r in rec.records:
        while pending is not None and pending.arrival_tick <= r.tick:
            if pages[pending.id] <= kv_pages:
                waiting[pending.id] = pending.arrival_tick  # busy steps are consecutive
            pending = next(arrivals, None)
        for rid in r.admitted:
            del waiting[rid]
        free = kv_pages - r.kv_pages_used
        spent = sum(min(info[rid].prompt_tokens, budget) for rid in r.admitted)
        left = budget - spent
        order = sorted(waiting, key=lambda rid: (info[rid].priority, info[rid].arrival_tick, rid))
        claim_pages = claim_tokens = 0
        for rid in order:
            q = info[rid]
            fits_budget = q.prompt_tokens <= left - claim_tokens or (
                q.prompt_tokens > budget and not r.admitted and not claim_pages)
            assert not (pages[rid] <= free - claim_pages and fits_budget), (
                f"{rid} waits at tick {r.tick} although it fits: pages {pages[rid]} free {free} "
                f"claim {claim_pages}, prompt {q.prompt_tokens} budget left {left}")
            if not claim_pages and r.tick - waiting[rid] >= aging:
                claim_pages, claim_tokens = pages[rid], min(q.prompt_tokens, budget)


@SETTINGS
@given(workloads(), policies)
def test_replay_is_deterministic(requests: list[Request], params: tuple[int, ...]) -> None:
    a = replay(requests, params)
    b = replay(list(requests), params)
    assert a[2] == b[2]
    assert a[0].records == b[0].records


def test_aging_bounds_how_long_a_large_request_waits() -> None:
    """A request needing the whole cache behind a steady stream of small ones."""
    big = Request(id="big", prompt_tokens=150, max_output_tokens=10, arrival_tick=1)
    small = [Request(id=f"s{i:03d}", prompt_tokens=16, max_output_tokens=4, arrival_tick=i)
             for i in range(0, 200)]
    requests = sorted([big, *small], key=lambda q: (q.arrival_tick, q.id))
    for aging, bound in ((0, 6), (8, 14)):
        rec, _, _ = replay(requests, (16, 10, 128, 4, aging))
        admitted = next(o for o in rec.outcomes if o.id == "big").admitted_tick
        assert admitted is not None and admitted - big.arrival_tick <= bound
    # Without aging the stream keeps the big request out far longer.
    rec, _, _ = replay(requests, (16, 10, 128, 4, 10**9))
    assert next(o for o in rec.outcomes if o.id == "big").admitted_tick > 150


ids = st.lists(st.sampled_from(["a", "b", "c"]), max_size=3).map(tuple)
#: TickRecord's fields in order, with values for each
record_fields = st.tuples(
    st.integers(0, 10**9), ids, st.integers(0, 10**6), ids, st.integers(0, 64), st.integers(0, 9),
    st.integers(0, 9), st.integers(0, 99), st.integers(0, 99), ids, ids, ids, st.integers(1, 10**6),
    st.none() | st.floats(0, 1e6), st.none() | st.just({"free_blocks": 3}),
)


@settings(max_examples=50, deadline=None)
@given(record_fields)
def test_tick_record_builds_the_same_frozen_value_as_the_constructor(values: tuple[Any, ...]) -> None:
    names = [a.name for a in attrs.fields(TickRecord)]
    fast = tick_record(*values)
    slow = TickRecord(**dict(zip(names, values, strict=True)))
    assert type(fast) is TickRecord
    assert attrs.asdict(fast) == attrs.asdict(slow) and fast == slow
    assert [getattr(fast, name) for name in names] == list(values)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.tick = 1  # type: ignore[misc]
