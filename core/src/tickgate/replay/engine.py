"""The replay loop: arrivals -> scheduler step -> sinks, one step at a time.

The loop is deliberately dumb. It streams requests in arrival order into the
scheduler, asks it for one step (or a span of identical steps up to the next
arrival), hands the record to the sinks and jumps the clock over idle time.
All scheduling semantics live in the scheduler plugin.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

import attrs

from ..host.policy import Policy, require_section
from ..host.registry import PluginInfo, Registry, get_registry
from ..interfaces import AdmissionContext, BuildContext, Clock, Horizon, Scheduler, optional_attribute
from ..interfaces.model import Request, RequestOutcome, TickRecord
from ..util.errors import InputError, PluginError, ReplayError, TickLimitExceeded

DEFAULT_MAX_TICKS = 50_000_000
#: consecutive steps that change nothing before a replay is declared stuck
STALL_LIMIT = 100_000


class Sink(Protocol):
    def record(self, record: TickRecord) -> None: ...

    def outcome(self, outcome: RequestOutcome) -> None: ...

    def arrival(self, request: Request) -> None: ...


def build_scheduler(
    policy: Policy, clock: Clock, registry: Registry | None = None, *, prefix_block_size: int | None = None
) -> tuple[Scheduler, dict[str, Any]]:
    """Instantiate the policy's scheduler with its allocator and admission policy.

    Returns the scheduler and a description of what was built (for the report).
    """
    registry = registry or get_registry()
    sched_sel = require_section(policy, "scheduler")
    cls = sched_sel.plugin.obj
    adm_sel = policy.selection("admission")
    kv_sel = policy.selection("kv_allocator")
    built: dict[str, Any] = {"scheduler": {"name": sched_sel.plugin.name, "options": dict(sched_sel.options)}}

    if adm_sel is not None:
        if not optional_attribute(cls, "uses_admission_policy"):
            raise InputError(
                policy.path,
                f'scheduler "{cls.name}" orders its own queue '
                f"({optional_attribute(cls, 'admission_note')}); "
                "remove the admission section",
                **policy.locate("admission"),
            )
        supported = optional_attribute(cls, "supported_admission")
        if supported is not None and adm_sel.plugin.name not in supported:
            raise InputError(
                policy.path,
                f'admission "{adm_sel.plugin.name}" does not compose with '
                f'scheduler "{cls.name}"; it supports: {", ".join(sorted(supported))}',
                **policy.locate("admission", "name"),
            )
    if kv_sel is not None and not optional_attribute(cls, "uses_kv_allocator"):
        raise InputError(
            policy.path,
            f'scheduler "{cls.name}" manages its own KV cache; remove the kv_allocator section',
            **policy.locate("kv_allocator"),
        )

    def make_kv(capacity: int, page_size: int, default: str = "paged") -> Any:
        info = kv_sel.plugin if kv_sel is not None else registry.get("kv_allocator", default)
        options = kv_sel.options if kv_sel is not None else {}
        built["kv_allocator"] = {"name": info.name, "options": dict(options)}
        return policy.build_plugin(
            info,
            lambda: info.obj.build(options, capacity, page_size),
            *(("kv_allocator",) if kv_sel is not None else policy.scheduler_at),
            "name",
        )

    def make_admission(actx: AdmissionContext, default: str | None = "priority-fcfs") -> Any:
        if adm_sel is not None:
            info = adm_sel.plugin
        elif default is not None:
            info = registry.get("admission", default)
        else:
            return None
        options = adm_sel.options if adm_sel is not None else {}
        built["admission"] = {"name": info.name, "options": dict(options)}
        return policy.build_plugin(
            info,
            lambda: info.obj.build(options, actx),
            *(("admission",) if adm_sel is not None else policy.scheduler_at),
            "name",
        )

    ctx = BuildContext(
        clock=clock,
        timing=policy.timing,
        make_kv_allocator=make_kv,
        make_admission=make_admission,
        prefix_block_size=prefix_block_size,
    )
    scheduler = policy.build_plugin(
        sched_sel.plugin, lambda: cls.build(sched_sel.options, ctx), *policy.scheduler_at, "name"
    )
    return scheduler, built


class _Window:
    """Closed-loop clients: at most ``size`` requests in flight, as ``vllm bench serve
    --max-concurrency`` keeps them (an ``asyncio.Semaphore`` around each request, whose
    waiters are served first come, first served).

    Requests take a slot in workload order. A request is issued at its own arrival or
    when the slot it takes was freed, whichever is later, and carries that effective
    arrival (``arrival_ms``, or ``arrival_tick`` when untimed), so latencies count from
    when the client sent it. A slot is freed when a request finishes: a completion at
    its ``finished_ms`` (untimed: the step after its ``finished_tick``), a rejection at
    the start of the step that reports it (untimed: the step after). Slots are taken in
    the order they were freed, so a request always gets the earliest one; slots never
    used are free from the start. Cost: O(1) per request and per outcome.
    """

    __slots__ = ("freed", "timed", "unused")

    def __init__(self, size: int, timed: bool) -> None:
        self.unused = size  # slots no request has held yet
        self.freed: deque[float] = deque()  # times (ms or ticks) at which held slots came free
        self.timed = timed

    def issue(self, request: Request) -> Request | None:
        """``request`` as the client sends it, or None while every slot is held."""
        if self.unused:
            self.unused -= 1
            return request
        if not self.freed:
            return None
        at = self.freed.popleft()
        if self.timed:
            arrival = request.arrival_ms
            assert arrival is not None  # timed: every request has one
            if at > arrival:
                return attrs.evolve(request, arrival_ms=at)
        elif at > request.arrival_tick:
            return attrs.evolve(request, arrival_tick=int(at))
        return request

    def release(self, outcomes: list[RequestOutcome], step_tick: int, step_start_ms: float) -> None:
        """Free the slots of requests that finished in the step at ``step_tick``."""
        times: list[float] = []
        for o in outcomes:
            if not self.timed:
                times.append((o.finished_tick if o.finished_tick is not None else step_tick) + 1)
            elif o.status == "completed" and o.finished_ms is not None:
                times.append(o.finished_ms)
            else:  # a rejection: at the start of the step that reports it
                times.append(step_start_ms)
        times.sort()  # rejections (step start) before completions (its end); ties are alike
        self.freed.extend(times)


class Frontend:
    """The server's front end, one serial process ahead of the engine (an API
    server: it sets each request up and streams its tokens back). A request
    enters the engine when it arrives or when the front end has worked off the
    requests before it, whichever is later; each costs the front end the timing
    model's ``frontend_service_ms`` (charged when it enters: a fluid
    approximation of work that is in fact spread over its tokens). Only a front
    end that is busy for longer than the gaps between arrivals delays anything.

    The engine sees the entry time as the request's ``arrival_ms``; its outcome
    gets the client's arrival back, so TTFT and end-to-end latency count the
    wait in the front end, as a benchmark client measures them.
    """

    __slots__ = ("client", "free_at", "service")

    def __init__(self, timing: Any) -> None:
        self.service = timing.frontend_service_ms
        self.free_at = float("-inf")
        self.client: dict[str, float] = {}  # request id -> arrival, for requests that waited

    def enter(self, request: Request) -> Request:
        at = request.arrival_ms
        assert at is not None  # only timed replays have a front end
        free = self.free_at
        self.free_at = (at if at >= free else free) + self.service(
            request.prompt_tokens,
            request.max_output_tokens,
        )
        if at >= free:
            return request
        self.client[request.id] = at
        return attrs.evolve(request, arrival_ms=free)

    def leave(self, outcome: RequestOutcome) -> RequestOutcome:
        at = self.client.pop(outcome.id, None)
        return outcome if at is None else attrs.evolve(outcome, arrival_ms=at)


def run(
    requests: Iterable[Request],
    scheduler: Scheduler,
    clock: Clock,
    sinks: list[Any],
    *,
    timed: bool | None = None,
    max_ticks: int | None = None,
    label: str = "scheduler",
    max_concurrency: int | None = None,
    timing: Any = None,
) -> None:
    """Drive ``scheduler`` over ``requests`` until everything has finished.

    ``max_concurrency``: closed-loop clients, at most this many requests in flight
    (:class:`_Window`; the workload header's ``max_concurrency``). While every slot
    is held the next request has no arrival yet: it can only come after an outcome,
    and outcomes only come from single steps (a span never completes or rejects), so
    spans run unbounded by it and stop at completions as they always do; fast and
    slow paths then see the same arrivals at the same steps. Such a request is held
    as ``waiting`` with ``pending`` None, so the loop sees no next arrival, exactly
    as after the last one, and runs as it does without a window.

    ``timing``: the policy's timing model; one with a serial front end
    (``serial_frontend``) puts :class:`Frontend` between the clients and the engine.
    """
    limit = max_ticks or DEFAULT_MAX_TICKS
    it = iter(requests)
    pending = next(it, None)
    if timed is None:
        timed = pending is not None and pending.arrival_ms is not None
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency}")
    window = _Window(max_concurrency, timed) if max_concurrency is not None else None
    if window is not None and pending is not None:
        pending = window.issue(pending)  # a slot is free for the first
    frontend = Frontend(timing) if timed and timing is not None and timing.serial_frontend else None
    if frontend is not None and pending is not None:
        pending = frontend.enter(pending)
    waiting: Request | None = None  # the next request while it waits for a slot (pending is None)
    stalled = 0
    horizon_for: Request | bool | None = False  # the pending request `horizon` was built for
    horizon = Horizon()
    # Bound methods, looked up once: this loop runs once per record.
    has_work, step, pop_outcomes = scheduler.has_work, scheduler.step, scheduler.pop_outcomes
    on_arrival = [sink.arrival for sink in sinks]
    on_record = [sink.record for sink in sinks]
    on_outcome = [sink.outcome for sink in sinks]
    while True:
        if not has_work():
            if pending is None:
                if waiting is None:
                    break
                # every slot held, nothing running: take the outcomes the scheduler holds
                outcomes = pop_outcomes()
                if frontend is not None:
                    outcomes = [frontend.leave(o) for o in outcomes]
                for outcome in outcomes:
                    for fn in on_outcome:
                        fn(outcome)
                assert window is not None  # only a window holds a request back (waiting)
                window.release(outcomes, clock.tick, clock.now_ms)
                pending = window.issue(waiting)
                if pending is None:
                    raise PluginError(
                        f"{label} has no work and reported no outcome at step {clock.tick}, "
                        f"yet {max_concurrency} requests are in flight (max_concurrency)"
                    )
                waiting = None
                if frontend is not None:
                    pending = frontend.enter(pending)
            if timed:
                arrival = pending.arrival_ms
                assert arrival is not None  # timed: every request has one
                if arrival > clock.now_ms:
                    clock.idle_ms += arrival - clock.now_ms
                    clock.now_ms = arrival
            elif pending.arrival_tick > clock.tick:
                clock.tick = pending.arrival_tick
        while pending is not None and (
            (pending.arrival_ms <= clock.now_ms) if timed else (pending.arrival_tick <= clock.tick)  # type: ignore[operator]  # timed: arrival_ms set
        ):
            for fn in on_arrival:
                fn(pending)
            scheduler.add(pending)
            pending = next(it, None)
            if window is not None and pending is not None:
                issued = window.issue(pending)
                if issued is None:
                    waiting, pending = pending, None  # no arrival until a slot frees
                else:
                    pending = issued
            if frontend is not None and pending is not None:
                pending = frontend.enter(pending)
        if pending is not horizon_for:
            # timed horizons only change with the next arrival: one per arrival, not per record.
            # No span may run past the tick limit: a scheduler fast-forwarding a state that never
            # changes (a request it can never admit, nothing running) would otherwise compute a
            # span of ~2**62 steps and never return; bounded, the replay stops with TickLimitExceeded.
            # A request waiting for a slot bounds nothing: it arrives after an outcome (run's docstring).
            horizon_for = pending
            budget = limit + 1 - clock.tick
            if pending is None:
                horizon = Horizon(max_ticks=budget)
            elif timed:
                horizon = Horizon(max_ticks=budget, until_ms=pending.arrival_ms)
        if pending is not None and not timed:
            horizon = Horizon(max_ticks=pending.arrival_tick - clock.tick)
        if not has_work():
            continue
        record = take_step(step, horizon, clock, label)
        for fn in on_record:
            fn(record)
        outcomes = pop_outcomes()
        if frontend is not None and outcomes:
            outcomes = [frontend.leave(o) for o in outcomes]
        for outcome in outcomes:
            for fn in on_outcome:
                fn(outcome)
        if window is not None and outcomes:
            window.release(outcomes, clock.tick, clock.now_ms)  # the clock is still at the step's start
            if waiting is not None:
                pending = window.issue(waiting)
                if pending is not None:
                    waiting = None
                    if frontend is not None:
                        pending = frontend.enter(pending)
        stalled = advance(clock, record, stalled, limit)


def take_step(step: Any, horizon: Horizon, clock: Clock, label: str) -> TickRecord:
    """``step(horizon)``, its record checked: a scheduler that fails or returns
    something else than a record of the current step is named (:func:`culprit`)."""
    try:
        record = step(horizon)
    except (InputError, PluginError, ReplayError):
        raise
    except Exception as exc:
        raise PluginError(
            f"{culprit(exc, label)} failed at step {clock.tick}: {type(exc).__name__}: {exc}"
        ) from exc
    if type(record) is not TickRecord:
        raise PluginError(
            f"{label} returned {type(record).__name__} instead of a TickRecord at step {clock.tick}"
        )
    span = record.span
    if record.tick != clock.tick or type(span) is not int or span < 1:
        raise PluginError(
            f"{label} returned a record for tick {record.tick} (span {span}) at step {clock.tick}"
        )
    return record


def advance(clock: Clock, record: TickRecord, stalled: int, limit: int) -> int:
    """Move the clock past ``record``; returns the steps without progress so far
    (a stall is named before the tick limit it would run into)."""
    span = record.span
    clock.tick += span
    if record.duration_ms is not None:
        clock.now_ms += record.duration_ms
    if not record.decode_tokens and _idle(record):
        stalled += span
        if stalled >= STALL_LIMIT:
            raise ReplayError(
                f"no progress for {stalled} steps at step {clock.tick}: "
                f"{record.queued} requests queued, {record.active} active; "
                "the policy can never admit them"
            )
    else:
        stalled = 0
    if clock.tick > limit:
        raise TickLimitExceeded(limit)
    return stalled


def culprit(exc: BaseException, default: str) -> str:
    """Name the plugin whose code raised: the innermost traceback frame that
    belongs to a registered plugin's module (a scheduler calls its admission
    policy and allocator, so the scheduler is not always the one to blame)."""
    modules: dict[str, PluginInfo] = {}
    for info in get_registry():
        module = getattr(info.obj, "__module__", None)
        if module:
            modules.setdefault(module, info)
    blamed: PluginInfo | None = None
    tb = exc.__traceback__
    while tb is not None:
        found = modules.get(tb.tb_frame.f_globals.get("__name__", ""))
        if found is not None:
            blamed = found
        tb = tb.tb_next
    return blamed.label() if blamed is not None else default


def _idle(record: TickRecord) -> bool:
    return not (
        record.admitted
        or record.prefill_tokens
        or record.decode_tokens
        or record.completed
        or record.rejected
        or record.preempted
    )
