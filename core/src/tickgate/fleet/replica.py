"""One scheduler on the fleet's clock (:class:`Engine`) and what a router
routes to (:class:`Target`: a replica, one engine or its data-parallel ranks).

An :class:`Engine` is a plain replay's loop body: the same scheduler built the
same way (:func:`tickgate.replay.engine.build_scheduler`), its own
:class:`~tickgate.interfaces.Clock`, the same sinks, the same checks of every
record (:func:`~tickgate.replay.engine.take_step`,
:func:`~tickgate.replay.engine.advance`) and the same horizons: a span ends
before the engine's next arrival, built once per arrival as the plain loop
builds it. That is what makes a one-replica fleet make the plain replay's
decisions, record for record.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from ..interfaces import Clock, Horizon, optional_attribute
from ..interfaces.model import Request, RequestOutcome, TickRecord
from ..replay.engine import Frontend, advance, take_step
from ..replay.fingerprint import FingerprintSink
from ..replay.report import SummarySink
from ..replay.sidecar import Sidecar

__all__ = ["Engine", "Target"]

#: the horizon of a lockstep rank: exactly one step (its group decides what comes next)
_ONE_STEP = Horizon(max_ticks=1)


class Engine:
    """A scheduler with its clock, sinks and the counts a router reads."""

    __slots__ = (
        "built",
        "busy",
        "clock",
        "digest",
        "entries",
        "fingerprint",
        "frontend",
        "hit_tokens",
        "horizon",
        "horizon_for",
        "in_flight",
        "index",
        "label",
        "limit",
        "name",
        "pool",
        "prefilled_tokens",
        "rank",
        "routed",
        "running",
        "scheduler",
        "sidecar",
        "sinks",
        "stalled",
        "summary",
        "transferred",
    )

    def __init__(
        self,
        index: int,
        name: str,
        pool: str,
        rank: int,
        scheduler: Any,
        clock: Clock,
        built: dict[str, Any],
        limit: int,
        detail_limit: int,
        sidecar: bool = False,
    ) -> None:
        self.index = index  # position in the fleet (ties between equal times go to the lower)
        self.name = name
        self.pool = pool
        self.rank = rank
        self.scheduler = scheduler
        self.clock = clock
        self.built = built
        self.label = f'scheduler "{built["scheduler"]["name"]}" of {name}'
        every = bool(optional_attribute(scheduler, "decoded_lists_every_sample"))
        #: the plain replay's two sinks, or a sidecar computing them in a child (:meth:`finish`)
        self.sidecar = Sidecar(detail_limit, every_sample=every) if sidecar else None
        self.fingerprint: FingerprintSink | None = None if sidecar else FingerprintSink()
        self.summary: SummarySink | None = (
            None if sidecar else SummarySink(detail_limit=detail_limit, every_sample=every)
        )
        self.sinks: list[Any] = [self.sidecar] if sidecar else [self.fingerprint, self.summary]
        self.digest: str | None = None
        self.limit = limit
        self.stalled = 0
        self.horizon = Horizon()
        self.horizon_for: float | bool | None = False  # the next arrival `horizon` was built for
        #: requests routed here, in the order (and at the time, arrival_ms) they enter the scheduler
        self.entries: deque[Request] = deque()
        self.in_flight = 0
        self.routed = 0
        self.running = 0
        self.prefilled_tokens = 0
        self.busy = False  # in the fleet's step heap
        self.hit_tokens = getattr(scheduler, "prefix_hit_tokens", None)
        self.frontend: Frontend | None = None  # its replica's: outcomes get the client's arrival back
        #: a disaggregated fleet's decode side: every request arrives with its prompt's KV computed
        self.transferred = False

    # -- the plain replay's loop body -------------------------------------------
    def enter(self, request: Request) -> None:
        """``request`` joins the scheduler's queue (before the step at its ``arrival_ms``)."""
        clock = self.clock
        at = request.arrival_ms
        assert at is not None  # a fleet's requests are timed
        if not self.busy and at > clock.now_ms:
            clock.idle_ms += at - clock.now_ms
            clock.now_ms = at
        for sink in self.sinks:
            sink.arrival(request)
        if self.transferred:
            self.scheduler.add_transferred(request)
        else:
            self.scheduler.add(request)

    def step(self, next_arrival_ms: float | None) -> tuple[TickRecord, list[RequestOutcome]]:
        """One step (or span), ending before ``next_arrival_ms``; its record and outcomes."""
        clock = self.clock
        if next_arrival_ms != self.horizon_for:
            self.horizon_for = next_arrival_ms
            budget = self.limit + 1 - clock.tick
            self.horizon = Horizon(max_ticks=budget, until_ms=next_arrival_ms)
        record = take_step(self.scheduler.step, self.horizon, clock, self.label)
        outcomes = self.scheduler.pop_outcomes()
        if self.frontend is not None and outcomes:
            outcomes = [self.frontend.leave(o) for o in outcomes]
        return self.settle(record, outcomes)

    def take_one(self) -> TickRecord:
        """One step exactly (a lockstep rank: its group steps together), not yet settled."""
        return take_step(self.scheduler.step, _ONE_STEP, self.clock, self.label)

    def settle(
        self, record: TickRecord, outcomes: list[RequestOutcome]
    ) -> tuple[TickRecord, list[RequestOutcome]]:
        """Feed the sinks a step's record and outcomes and move the clock past it."""
        clock = self.clock
        for sink in self.sinks:
            sink.record(record)
        for o in outcomes:
            for sink in self.sinks:
                sink.outcome(o)
        self.running = record.active
        self.prefilled_tokens += record.prefill_tokens * record.span
        self.stalled = advance(clock, record, self.stalled, self.limit)
        return record, outcomes

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    def finish(self) -> None:
        """The replay is over: the fingerprint, and the summary sink back from a sidecar."""
        if self.sidecar is not None:
            self.digest, self.summary = self.sidecar.finish()
        else:
            assert self.fingerprint is not None  # without a sidecar the sink is here
            self.digest = self.fingerprint.hexdigest()

    def close(self) -> None:
        if self.sidecar is not None:
            self.sidecar.close()


class Target:
    """What a router picks: one replica, whose ranks are engines (one, or its
    data-parallel ranks). Implements :class:`tickgate.interfaces.routing.ReplicaView`."""

    __slots__ = ("dp_start", "engines", "frontend", "lockstep", "name", "pool", "position", "prefix")

    def __init__(
        self,
        position: int,
        name: str,
        pool: str,
        engines: list[Engine],
        timing: Any,
        lockstep: bool,
        prefix: Callable[[int, Request], int],
    ) -> None:
        self.position = position
        self.name = name
        self.pool = pool
        self.engines = engines
        self.lockstep = lockstep
        # the replica's API server: one serial front end ahead of all its ranks
        self.frontend = Frontend(timing) if timing is not None and timing.serial_frontend else None
        self.dp_start = 0
        self.prefix = prefix  # (engine index, request) -> cached prefix tokens there

    # -- ReplicaView -------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return sum(e.in_flight for e in self.engines)

    @property
    def routed(self) -> int:
        return sum(e.routed for e in self.engines)

    @property
    def running(self) -> int:
        return sum(min(e.running, e.in_flight) for e in self.engines)

    @property
    def waiting(self) -> int:
        return self.in_flight - self.running

    @property
    def prefilled_tokens(self) -> int:
        return sum(e.prefilled_tokens for e in self.engines)

    def kv_used_pages(self) -> int:
        return sum(e.scheduler.kv_used_pages() for e in self.engines)

    def kv_capacity_pages(self) -> int:
        return sum(e.scheduler.kv_capacity_pages() for e in self.engines)

    def cached_prefix_tokens(self, request: Request) -> int:
        return max(self.prefix(e.index, request) for e in self.engines)

    # -- data-parallel balancing ---------------------------------------------------
    def pick_rank(self) -> Engine:
        """The rank a request goes to, as vLLM's DP load balancer picks it
        (``DPLBAsyncMPClient.get_core_engine_for_request``, the classic score:
        ``4 * waiting + running`` per rank, scanned from the start index, the
        first strictly lowest wins). Counts are exact here (the driver's), not
        the coordinator's delayed snapshot, so vLLM's optimistic ``+1`` waiting
        is the count itself."""
        engines = self.engines
        if len(engines) == 1:
            return engines[0]
        n = len(engines)
        best = None
        best_score = 0
        for k in range(n):
            e = engines[(self.dp_start + k) % n]
            running = min(e.running, e.in_flight)
            score = 4 * (e.in_flight - running) + running
            if best is None or score < best_score:
                best, best_score = e, score
        assert best is not None  # two ranks or more: the loop took one
        return best
