"""The decode side of disaggregated prefill/decode in ``vllm-v1``: ``add_transferred``.

A transferred request waits like any other, needs blocks for its whole prompt (less
its local prefix-cache hits) when its turn comes, is scheduled for its last prompt
token and samples its first output token in that step (vLLM's NIXL decode side,
docs/vllm.md "Disaggregated decode side"). The scheduler is driven directly, as a
fleet drives it: ``add`` / ``add_transferred``, ``step(Horizon)``, ``pop_outcomes``
on a shared :class:`Clock`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickgate import Request
from tickgate.interfaces import Clock, Horizon, optional_attribute
from tickgate.host.policy import load_policy
from tickgate.replay.engine import build_scheduler
from tickgate.replay.fingerprint import canonical_body

LINEAR = {"name": "linear", "options": {"fixed_ms": 5.0, "per_prefill_token_ms": 0.03,
                                        "per_decode_seq_ms": 0.25, "per_context_token_ms": 0.001}}
#: a model that prices a step's prefill chunks by their shape (price_step)
ROOFLINE = {"name": "roofline", "options": {"model": "llama-3.1-8b", "gpu": "H100-SXM-80GB"}}
FAR = 10**9  # ticks: no more arrivals


def policy(tmp_path: Path, options: dict[str, Any], timed: bool | str = False,
           name: str = "p.yaml") -> Any:
    doc: dict[str, Any] = {"version": 1, "scheduler": {"name": "vllm-v1", "options": options}}
    if timed:
        doc["timing"] = ROOFLINE if timed == "roofline" else LINEAR
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return load_policy(path)


def base(**over: Any) -> dict[str, Any]:
    opts = {"block_size": 4, "num_gpu_blocks": 33, "max_num_seqs": 8, "max_num_batched_tokens": 64}
    opts.update(over)
    return opts


def req(rid: str, prompt: int | list[int], out: int, at: float = 0, timed: bool = False,
        **kw: Any) -> Request:
    when = {"arrival_ms": float(at)} if timed else {"arrival_tick": int(at)}
    if isinstance(prompt, list):
        return Request(id=rid, prompt_tokens=len(prompt), max_output_tokens=out,
                       prompt_token_ids=tuple(prompt), **when, **kw)
    return Request(id=rid, prompt_tokens=prompt, max_output_tokens=out, **when, **kw)


@attrs.define
class Run:
    records: list[Any]
    outcomes: dict[str, Any]
    summary: dict[str, Any]
    scheduler: Any


def drive(pol: Any, arrivals: list[tuple[Request, bool]], *, path: str = "fast",
          prefix_block_size: int | None = None) -> Run:
    """Run ``arrivals`` ((request, transferred) in arrival order) as the engine loop does.

    ``path``: ``fast`` (every fast path), ``observer`` (an observer attached: full
    steps only, as conformance runs it), ``reference`` (the two-pass reference step
    for every step, fcfs included)."""
    clock = Clock()
    sched, _ = build_scheduler(pol, clock, prefix_block_size=prefix_block_size)
    if path == "observer":
        sched.observer = lambda step: None
    elif path == "reference":
        sched.observer = lambda step: None
        sched._full_step_fcfs = sched._full_step  # the reference step serves fcfs as well
    timed = bool(arrivals) and arrivals[0][0].arrival_ms is not None
    records: list[Any] = []
    outcomes: dict[str, Any] = {}
    i = 0
    while True:
        if not sched.has_work():
            if i == len(arrivals):
                break
            nxt = arrivals[i][0]
            if timed and nxt.arrival_ms > clock.now_ms:
                clock.idle_ms += nxt.arrival_ms - clock.now_ms
                clock.now_ms = nxt.arrival_ms
            elif not timed and nxt.arrival_tick > clock.tick:
                clock.tick = nxt.arrival_tick
        while i < len(arrivals) and ((arrivals[i][0].arrival_ms <= clock.now_ms) if timed
                                     else (arrivals[i][0].arrival_tick <= clock.tick)):
            r, transferred = arrivals[i]
            (sched.add_transferred if transferred else sched.add)(r)
            i += 1
        if i < len(arrivals):
            nxt = arrivals[i][0]
            horizon = (Horizon(max_ticks=FAR, until_ms=nxt.arrival_ms) if timed
                       else Horizon(max_ticks=nxt.arrival_tick - clock.tick))
        else:
            horizon = Horizon(max_ticks=FAR)
        if not sched.has_work():
            continue
        record = sched.step(horizon)
        assert record.tick == clock.tick and record.span >= 1
        records.append(record)
        for o in sched.pop_outcomes():
            assert o.id not in outcomes
            outcomes[o.id] = o
        clock.tick += record.span
        if record.duration_ms is not None:
            clock.now_ms += record.duration_ms
    return Run(records, outcomes, dict(sched.extra_summary()), sched)


def merged(records: list[Any]) -> list[tuple[int, int, str]]:
    """Records as the fingerprint sees them: runs of identical bodies merged."""
    out: list[tuple[int, int, str]] = []
    for r in records:
        body = canonical_body(r)
        if out and out[-1][2] == body and out[-1][0] + out[-1][1] == r.tick:
            out[-1] = (out[-1][0], out[-1][1] + r.span, body)
        else:
            out.append((r.tick, r.span, body))
    return out


def sched_entries(run: Run, rid: str) -> list[tuple[int, list[Any]]]:
    return [(r.tick, e) for r in run.records for e in r.detail["sched"] if e[0] == rid]


def test_the_capabilities_are_declared() -> None:
    from tickgate_sglang.scheduler import SglangScheduler
    from tickgate_trtllm.scheduler import TrtllmScheduler
    from tickgate_vllm.v1.scheduler import VllmV1Scheduler

    assert optional_attribute(VllmV1Scheduler, "accepts_transferred_kv") is True
    for cls in (VllmV1Scheduler, SglangScheduler, TrtllmScheduler):
        assert optional_attribute(cls, "supports_data_parallel") is True
    assert optional_attribute(SglangScheduler, "accepts_transferred_kv") is False


def test_admission_takes_the_whole_prompt_and_schedules_its_last_token(tmp_path: Path) -> None:
    run = drive(policy(tmp_path, base()), [(req("A", 10, 3), True)])
    first = run.records[0]
    assert first.admitted == ("A",) and first.decoded == ("A",)  # first token sampled in the admission step
    assert first.detail["sched"] == [["A", 1, "transferred", 0]]
    assert first.kv_pages_reserved == 3  # ceil(10 / 4); the one token fits in them
    assert (first.prefill_tokens, first.decode_tokens) == (1, 0)
    o = run.outcomes["A"]
    assert (o.admitted_tick, o.first_token_tick, o.output_tokens, o.prefix_hit_tokens) == (0, 0, 3, 0)
    assert o.finished_tick == 2  # two more decode steps
    assert run.summary["transferred"] == {"requests": 1, "tokens": 10, "local_hit_tokens": 0}
    assert run.summary["prefix_cache"]["hit_tokens"] == 0
    assert run.scheduler.kv_used_pages() == 0
    # the same request added normally prefills its 10 tokens in the first step
    plain = drive(policy(tmp_path, base(), name="q.yaml"), [(req("A", 10, 3), False)])
    assert plain.records[0].detail["sched"] == [["A", 10, "new", 0]]
    assert "transferred" not in plain.summary  # reports without PD keep their bytes


def test_the_admission_step_is_priced_as_one_token_after_the_prompt(tmp_path: Path) -> None:
    """A model that prices chunks by shape sees one chunk of one token after 3999 computed
    ones (it attends over the whole prompt), not a 4000-token prefill."""
    pol = policy(tmp_path, base(block_size=16, num_gpu_blocks=300, max_num_batched_tokens=4096),
                 timed="roofline")
    moved = drive(pol, [(req("A", 4000, 2, 0.0, timed=True), True)])
    first = moved.records[0]
    assert first.duration_ms == pol.timing.price_step(1, 0, 0, 1, 4000, 3999)
    plain = drive(pol, [(req("A", 4000, 2, 0.0, timed=True), False)])
    assert plain.records[0].duration_ms == pol.timing.price_step(4000, 0, 0, 1, 4000 * 4001 // 2, 0)
    assert plain.records[0].duration_ms > first.duration_ms
    o = moved.outcomes["A"]
    assert o.first_token_ms == first.duration_ms and o.arrival_ms == 0.0


def test_a_block_aligned_prompt_needs_no_extra_block(tmp_path: Path) -> None:
    run = drive(policy(tmp_path, base()), [(req("A", 12, 2), True)])
    assert run.records[0].kv_pages_reserved == 3
    # token 13 takes a block
    assert run.records[1].kv_pages_reserved == 0 and run.records[1].kv_pages_used == 4
    assert run.scheduler.kv_used_pages() == 0


def test_local_hits_shorten_the_transfer_and_are_the_only_hits(tmp_path: Path) -> None:
    shared = list(range(100, 112))  # three blocks of 4
    longer = shared + list(range(500, 505))  # 17 tokens: five blocks, three of them cached
    third = longer + [900, 901, 902]  # shares B's four full blocks
    arrivals = [(req("A", shared, 1, 0), False), (req("B", longer, 2, 5), True),
                (req("C", third, 1, 10), False)]
    run = drive(policy(tmp_path, base(enable_prefix_caching=True)), arrivals)
    (tick, entry), *_ = sched_entries(run, "B")
    assert entry == ["B", 1, "transferred", 12]
    admission = next(r for r in run.records if r.tick == tick)
    assert admission.kv_pages_reserved == 5 - 3
    assert run.outcomes["B"].prefix_hit_tokens == 12
    # C hits B's transferred blocks: they were registered under their hashes
    assert run.outcomes["C"].prefix_hit_tokens == 16
    assert run.summary["transferred"] == {"requests": 1, "tokens": 5, "local_hit_tokens": 12}
    pc = run.summary["prefix_cache"]
    assert pc["hit_tokens"] == 12 + 16 and pc["queried_tokens"] == 12 + 17 + 20
    assert run.scheduler.kv_used_pages() == 0


@pytest.mark.parametrize("policy_name", ["fcfs", "priority"])
def test_it_waits_while_its_prompt_blocks_do_not_fit(tmp_path: Path, policy_name: str) -> None:
    # 10 usable blocks: A holds 6 and grows; B's 20-token prompt needs 5, so it waits
    # until A finishes, and C (which would fit) waits behind it: head-of-line blocking
    arrivals = [(req("A", 20, 12, 0), False), (req("B", 20, 2, 1), True), (req("C", 4, 2, 2), False)]
    run = drive(policy(tmp_path, base(num_gpu_blocks=11, policy=policy_name)), arrivals)
    a, b, c = (run.outcomes[k] for k in "ABC")
    assert b.admitted_tick == a.finished_tick + 1
    assert c.admitted_tick == b.admitted_tick
    assert b.first_token_tick == b.admitted_tick
    waiting = [r for r in run.records if r.tick < b.admitted_tick and r.tick >= 1]
    assert waiting and all(r.queued >= 1 for r in waiting)
    assert run.scheduler.kv_used_pages() == 0


def test_it_counts_against_max_num_seqs_and_the_budget(tmp_path: Path) -> None:
    arrivals = [(req("A", 8, 4, 0), False), (req("B", 8, 2, 0), True)]
    run = drive(policy(tmp_path, base(max_num_seqs=1)), arrivals)
    assert run.outcomes["B"].admitted_tick == run.outcomes["A"].finished_tick + 1
    # a budget of 9: A's 8-token prefill leaves exactly the one token B needs
    run = drive(policy(tmp_path, base(max_num_batched_tokens=9), name="q.yaml"), arrivals)
    assert run.records[0].detail["sched"] == [["A", 8, "new", 0], ["B", 1, "transferred", 0]]
    run = drive(policy(tmp_path, base(max_num_batched_tokens=8), name="r.yaml"), arrivals)
    assert run.records[0].detail["sched"] == [["A", 8, "new", 0]]
    assert run.outcomes["B"].admitted_tick == 1


@pytest.mark.parametrize("policy_name", ["fcfs", "priority"])
def test_a_preempted_transferred_request_recomputes(tmp_path: Path, policy_name: str) -> None:
    # 8 usable blocks, two 8-token prompts growing a block every 4 steps: the pool runs
    # out and B (last in, worse priority) is preempted, then resumes by recompute
    arrivals = [(req("A", 8, 20, 0, priority=0), False), (req("B", 8, 20, 1, priority=1), True)]
    run = drive(policy(tmp_path, base(num_gpu_blocks=9, policy=policy_name)), arrivals)
    b = run.outcomes["B"]
    assert b.preemptions >= 1 and b.output_tokens == 20
    kinds = [e[2] for _, e in sched_entries(run, "B") if e[2] != "running"]
    assert kinds[0] == "transferred" and "resumed" in kinds
    resumed = next(e for _, e in sched_entries(run, "B") if e[2] == "resumed")
    assert resumed[1] > 1  # prompt and outputs computed again
    assert run.summary["transferred"]["requests"] == 1
    assert run.scheduler.kv_used_pages() == 0


def test_priority_orders_transferred_requests_like_any_other(tmp_path: Path) -> None:
    arrivals = [(req("A", 8, 3, 0), False), (req("L", 8, 2, 1, priority=5), False),
                (req("H", 8, 2, 1, priority=0), True)]
    run = drive(policy(tmp_path, base(max_num_seqs=1, policy="priority")), arrivals)
    assert run.outcomes["H"].admitted_tick < run.outcomes["L"].admitted_tick


# prompt, output, priority, arrival gap, shared-prefix family, transferred
_request = st.tuples(st.integers(1, 60), st.integers(1, 40), st.integers(0, 3), st.integers(0, 6),
                     st.integers(0, 2), st.booleans())


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reqs=st.lists(_request, min_size=1, max_size=14), blocks=st.integers(6, 40), caching=st.booleans(),
       policy_name=st.sampled_from(["fcfs", "priority"]),
       timed=st.sampled_from([False, "linear", "roofline"]),
       maxlen=st.sampled_from([None, 90]), watermark=st.sampled_from([0.0, 0.1]))
def test_fast_and_slow_paths_agree_on_mixed_traffic(
        tmp_path_factory: pytest.TempPathFactory, reqs: list[tuple[int, int, int, int, int, bool]],
        blocks: int, caching: bool, policy_name: str, timed: bool | str, maxlen: int | None,
        watermark: float) -> None:
    """Some requests added, some transferred: the fast paths (spans, decode group,
    one-pass fcfs), full steps only (max_span 1), the observer's steps and the
    reference two-pass step make the same records, outcomes and summary."""
    tmp_path = tmp_path_factory.mktemp("pd")
    arrivals, at = [], 0
    for i, (prompt, out, prio, gap, family, transferred) in enumerate(reqs):
        at += gap
        ids = tuple(range(family * 100, family * 100 + prompt // 4 + 1))
        when = at * 3.7 + 0.25 if timed else at
        r = req(f"r{i}", prompt, out, when, bool(timed), priority=prio, prefix_blocks=ids)
        arrivals.append((r, transferred))
    opts = base(num_gpu_blocks=blocks, enable_prefix_caching=caching, policy=policy_name, watermark=watermark)
    if maxlen is not None:
        opts["max_model_len"] = maxlen
    fast = drive(policy(tmp_path, opts, timed, "a.yaml"), arrivals, prefix_block_size=4)
    runs = [drive(policy(tmp_path, {**opts, "max_span": 1}, timed, "b.yaml"), arrivals, prefix_block_size=4),
            drive(policy(tmp_path, opts, timed, "c.yaml"), arrivals, path="observer", prefix_block_size=4),
            drive(policy(tmp_path, opts, timed, "d.yaml"), arrivals, path="reference", prefix_block_size=4)]
    for slow in runs:
        assert merged(fast.records) == merged(slow.records)
        assert fast.outcomes == slow.outcomes
        assert fast.summary == slow.summary
    for run in [fast, *runs]:
        assert run.scheduler.kv_used_pages() == 0
    admitted = {o.id for o in fast.outcomes.values() if o.status == "completed"}
    moved = sum(1 for r, t in arrivals if t and r.id in admitted)
    assert fast.summary.get("transferred", {}).get("requests", 0) == moved


def test_steady_traffic_with_transferred_requests_stays_on_the_fast_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Transferred requests join the decode group after their admission step: a
    replay of mostly transferred traffic runs in spans, identical to one step at a time."""
    from tickgate_vllm.v1.scheduler import VllmV1Scheduler

    per_request = ("_full_step_fcfs", "_fresh_span", "_finishing_decode_step", "_steady_span")
    calls = {name: 0 for name in per_request + ("_group_step", "_group_span")}
    for name in calls:
        original = getattr(VllmV1Scheduler, name)

        def counted(self: Any, *args: Any, _original: Any = original, _name: str = name) -> Any:
            calls[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(VllmV1Scheduler, name, counted)
    arrivals = [(req(f"r{i}", 10 + (7 * i) % 50, 3 + (5 * i) % 70, 3 * i, prefix_blocks=(i % 3, 10 + i)),
                 i % 4 != 0) for i in range(40)]
    opts = base(num_gpu_blocks=400, enable_prefix_caching=True)
    fast = drive(policy(tmp_path, opts), arrivals, prefix_block_size=4)
    assert calls["_group_step"] > 30 and calls["_group_span"] > 30
    assert {name: calls[name] for name in per_request} == {name: 0 for name in per_request}
    slow = drive(policy(tmp_path, {**opts, "max_span": 1}, name="q.yaml"), arrivals, prefix_block_size=4)
    assert merged(fast.records) == merged(slow.records) and fast.outcomes == slow.outcomes
    assert fast.summary == slow.summary and fast.summary["transferred"]["requests"] == 30
    assert len(fast.records) < len(slow.records) and max(r.span for r in fast.records) > 10


def test_a_rejection_is_the_same_as_for_add(tmp_path: Path) -> None:
    opts = base(max_model_len=16)
    moved = drive(policy(tmp_path, opts), [(req("A", 16, 2), True)])
    plain = drive(policy(tmp_path, opts, name="q.yaml"), [(req("A", 16, 2), False)])
    assert moved.outcomes == plain.outcomes and moved.outcomes["A"].status == "rejected"
    assert "transferred" not in moved.summary


def test_transferred_prompt_blocks_are_stored_kv_events(tmp_path: Path) -> None:
    """With KV events on, the blocks a transferred prompt brings are BlockStored events of
    its admission step, with the hashes a router would compute for the prompt (vLLM emits
    them from the cache_blocks() of _update_waiting_for_remote_kv)."""
    from tickgate.interfaces.kv_events import BlockStored

    clock = Clock()
    sched, _ = build_scheduler(policy(tmp_path, base(enable_prefix_caching=True)), clock)
    sched.enable_kv_events()
    r = req("A", list(range(100, 114)), 2)  # 14 tokens: three full blocks of 4
    sched.add_transferred(r)
    record = sched.step(Horizon(max_ticks=FAR))
    assert record.detail["sched"] == [["A", 1, "transferred", 0]]
    stored = [e for e in sched.drain_kv_events() if isinstance(e, BlockStored)]
    assert [h for e in stored for h in e.block_hashes] == sched.prompt_block_hashes(r)
    assert sum(e.token_count for e in stored) == 12
