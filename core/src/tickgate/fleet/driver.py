"""The fleet's one clock: routing, arrivals and every replica's steps in time order.

Events, earliest first; at equal times in this order, then by fleet position:

0. a control time of a fleet that scales (:mod:`.scaling`): replicas that become ready, then the
   autoscaler's decisions (they read the replicas' state: no span runs past a control time);
1. a KV transfer ends (disaggregated fleets): the request is routed to a decode replica;
2. a request arrives at the fleet: the router picks a replica (its front end, if the
   timing model has a serial one, may hold it: it enters the engine later);
3. a request enters a replica's scheduler (before any step that starts at or after
   its time, as in a plain replay);
4. a replica (or a lockstep group of data-parallel ranks) runs its next step.

Only replicas with work are in the step heap: an idle replica costs nothing
until a request enters it, and its clock then jumps (its idle time counted) as
a plain replay's does. A step may fast-forward a span of identical steps up to
the replica's next arrival. A router that reads replica state routes each
request at its arrival, so a span must end before the fleet's next arrival
(the request might come to this replica); a router that does not
(``uses_replica_state`` false), or a pool of one replica, is asked ahead, and
each replica's spans run up to its own next request. Both give the same
decisions; the second is cheaper (docs/fleets.md, "Cost").
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from ..host.policy import Policy
from ..interfaces import Clock, optional_attribute
from ..interfaces.kv_events import records_kv_events
from ..interfaces.model import Request, RequestOutcome
from ..interfaces.routing import Router, RouterContext
from ..replay.engine import DEFAULT_MAX_TICKS, build_scheduler
from ..util.errors import InputError, PluginError
from .event_sink import EventSink
from .handoff import Handoff
from .prefix_index import EventPrefixes, RoutedPrefixes
from .replica import Engine, Target
from .scaling import Scaling
from .spec import FleetSpec, PoolSpec

__all__ = ["Fleet"]

INF = float("inf")
#: requests a router that reads no state may be asked about ahead of their arrival
LOOKAHEAD = 4096


class Fleet:
    """Every replica of a policy's ``cluster`` section, built, and the loop that runs them."""

    def __init__(
        self,
        spec: FleetSpec,
        policy: Policy,
        *,
        prefix_block_size: int | None,
        detail_limit: int,
        sidecar: bool = False,
        kv_writer: Any = None,
    ) -> None:
        self.spec = spec
        self.policy = policy
        self.timing = policy.timing
        limit = policy.max_ticks or DEFAULT_MAX_TICKS
        self.engines: list[Engine] = []
        self.targets: list[Target] = []
        self.pool_targets: dict[str, list[Target]] = {}
        self.prefix_block_size = prefix_block_size
        self.sidecar = sidecar
        self.prefixes = RoutedPrefixes(prefix_block_size)
        self.events = EventPrefixes()
        self._single = len(spec.pools) == 1 and spec.pools[0].name == "default"
        self._limits = (limit, detail_limit)
        #: engine index -> its replica, and a replica's position in the whole fleet
        self.targets_of: list[Target] = []
        self.fleet_position: dict[int, int] = {}
        self.decision_counts: list[int] = []
        #: called with every engine the fleet builds, now or when a pool scales up (sinks, cleanup)
        self.engine_hooks: list[Any] = []
        self._kv_setup: tuple[Any, bool] | None = None
        self.prefill_engines: list[Engine] = []
        for pool in spec.pools:
            self.pool_targets[pool.name] = []
            for _ in range(pool.replicas):
                self._add_target(pool)
        # a mixed fleet: one router over every replica; disaggregated: one per side
        if spec.disaggregated:
            by_role = {p.role: p for p in spec.pools}
            self.entry_pool = by_role["prefill"]
        else:
            self.entry_pool = spec.pools[0]
        scaled = spec.autoscale
        # what the routers route over: every replica, or (a fleet that scales) the ready ones,
        # a list the scaling control keeps in place
        routed = {
            p.name: list(self.pool_targets[p.name]) if scaled else self.pool_targets[p.name]
            for p in spec.pools
        }
        self.entry_targets = routed[self.entry_pool.name] if spec.disaggregated or scaled else self.targets
        bound = scaled.bounds if scaled is not None else {}
        self.router = self._router(
            self.entry_pool, bound.get(self.entry_pool.name, (0, len(self.entry_targets)))[1]
        )
        self.handoff: Handoff | None = None
        if spec.disaggregated:
            self.decode_pool = by_role["decode"]
            self.decode_targets = routed[self.decode_pool.name]
            self.decode_router = self._router(
                self.decode_pool, bound.get(self.decode_pool.name, (0, len(self.decode_targets)))[1]
            )
            assert spec.transfer is not None  # fleet_spec gives a disaggregated fleet its transfer
            self.handoff = Handoff(spec.transfer)
        self.scaling: Scaling | None = None
        if scaled is not None:
            self.scaling = Scaling(
                scaled, [(p, routed[p.name]) for p in spec.pools], self._add_target, spec.seed
            )
        self.track_prefixes = bool(optional_attribute(self.router, "reads_cached_prefixes"))
        self._kv_events(
            kv_writer, self.track_prefixes and getattr(self.router, "prefix_source", "events") == "events"
        )
        # asked ahead: a router that reads no state (or has one replica to pick), when no replica
        # balances data-parallel ranks (that reads the ranks' counts at the arrival)
        # (in a fleet that scales, only up to the next control time: _next_arrival_scaled)
        self.eager = (
            not optional_attribute(self.router, "uses_replica_state")
            or (scaled is None and len(self.entry_targets) == 1)
        ) and all(len(t.engines) == 1 for t in self.entry_targets)
        #: routing decisions in order: (request id, replica name); the fleet fingerprint covers them
        self.decisions = hashlib.sha256()
        self.client_outcomes: list[RequestOutcome] = []
        self._on_outcome: list[Any] = []
        self.busy_ms = 0.0  # time during which at least one replica was stepping
        self._covered = -INF

    # -- building ---------------------------------------------------------------------
    def _add_target(self, pool: PoolSpec) -> Target:
        """One more replica of ``pool`` (at the start, or when the pool scales up): its
        engines built, named by its position in the pool (never reused)."""
        limit, detail_limit = self._limits
        targets = self.pool_targets[pool.name]
        i = len(targets)
        name = f"replica-{i}" if self._single else f"{pool.name}-{i}"
        ranks = []
        for k in range(pool.data_parallel_size):
            rank_name = name if pool.data_parallel_size == 1 else f"{name}/dp{k}"
            ranks.append(self._engine(pool, rank_name, k, limit, detail_limit))
        target = Target(i, name, pool.name, ranks, self.timing, pool.lockstep, self._cached_prefix)
        self.fleet_position[id(target)] = len(self.targets)
        targets.append(target)
        self.targets.append(target)
        self.decision_counts.append(0)
        for e in ranks:
            e.frontend = target.frontend
            e.transferred = pool.role == "decode"
            if pool.role == "prefill":
                self.prefill_engines.append(e)
            self.targets_of.append(target)
            if self._kv_setup is not None:
                self._engine_events(e, *self._kv_setup)
            for hook in self.engine_hooks:
                hook(e)
        return target

    def _engine(self, pool: PoolSpec, name: str, rank: int, limit: int, detail_limit: int) -> Engine:
        clock = Clock()
        scheduler, built = build_scheduler(pool.policy, clock, prefix_block_size=self.prefix_block_size)
        engine = Engine(
            len(self.engines),
            name,
            pool.name,
            rank,
            scheduler,
            clock,
            built,
            limit,
            detail_limit,
            self.sidecar,
        )
        self.engines.append(engine)
        self.prefixes.add_engine(scheduler)
        return engine

    def _kv_events(self, writer: Any, index: bool) -> None:
        """Turn on the engines' KV events where they are wanted: written to ``writer``
        (``--kv-events``; every engine must record them) and, for ``index``, read
        by the prefix-aware router in process (engines without them fall back to
        the record of what was routed there)."""
        self._kv_setup = (writer, index)
        for e in self.engines:
            self._engine_events(e, writer, index)

    def _engine_events(self, e: Engine, writer: Any, index: bool) -> None:
        records = records_kv_events(e.scheduler)
        if writer is not None and not records:
            pool = next(p for p in self.spec.pools if p.name == e.pool)
            raise InputError(
                self.policy.path,
                f'scheduler "{pool.scheduler.plugin.name}" of {e.name} does not '
                "record KV-cache events; --kv-events needs one that does, such as vllm-v1",
                **pool.policy.locate(*pool.policy.scheduler_at, "name"),
            )
        on = records and (index or writer is not None)
        self.events.add_engine(e.scheduler, on and index)
        if on:
            e.scheduler.enable_kv_events()
            e.sinks.append(EventSink(self, e, writer, on and index))

    def _cached_prefix(self, index: int, request: Request) -> int:
        if self.events.known(index):
            return self.events.cached_tokens(index, self.engines[index].scheduler, request)
        return self.prefixes.cached_tokens(index, request)

    def _router(self, pool: PoolSpec, replicas: int) -> Router:
        info = pool.router.plugin
        ctx = RouterContext(pool=pool.name, replicas=replicas, seed=self.spec.seed)
        at = (
            ("cluster", "pools", pool.name, "router", "name")
            if "pools" in self.policy.data["cluster"]
            and "router" in self.policy.data["cluster"]["pools"][pool.name]
            else ("cluster", "router", "name")
        )
        return self.policy.build_plugin(info, lambda: info.obj.build(pool.router.options, ctx), *at)

    # -- the loop -----------------------------------------------------------------------
    def run(self, requests: Iterable[Request], on_outcome: list[Any], source: str | None = None) -> None:
        """Replay ``requests`` (in arrival order, ``arrival_ms`` set) through the fleet;
        ``on_outcome``: callables given every outcome as the client sees it; ``source``:
        the workload file they come from, which an error about them names."""
        self._on_outcome = on_outcome
        self._it: Iterator[Request] = iter(requests)
        self._head: Request | None = next(self._it, None)
        if self._head is not None and self._head.arrival_ms is None:
            raise InputError(
                source,
                "a fleet replays arrivals in ms: the workload's requests need arrival_ms (a timed workload)",
            )
        self._ahead = 0  # requests routed ahead of their arrival, not yet entered
        self._seq = 0
        self.entries: list[tuple[float, int, int]] = []  # (time, seq, engine index)
        self.steps: list[tuple[float, int]] = []  # (start, engine index) of busy units
        entries, steps = self.entries, self.steps
        engines = self.engines
        handoff = self.handoff
        scaling = self.scaling
        if scaling is not None:
            self._on_outcome = [*on_outcome, scaling.outcome]
        while True:
            head = self._head
            t_head = head.arrival_ms if head is not None else INF
            assert t_head is not None  # a fleet's requests are timed
            t_entry = entries[0][0] if entries else INF
            t_step = steps[0][0] if steps else INF
            if scaling is not None and (
                head is not None or entries or steps or (handoff and handoff.pending)
            ):
                t_ctl = scaling.next_ms
                if t_ctl <= t_head and t_ctl <= t_entry and t_ctl <= t_step:
                    self._control(t_ctl)
                    continue
            if handoff is not None and handoff.pending:
                t_xfer = handoff.pending[0][0]
                if t_xfer <= t_head and t_xfer <= t_entry and t_xfer <= t_step:
                    self._route_decode(handoff.arrived())
                    continue
            if t_head <= t_entry and t_head <= t_step:
                if head is None:
                    break
                self._route(head)
            elif t_entry <= t_step:
                _, _, index = heapq.heappop(entries)
                engine = engines[index]
                self._ahead -= 1 if self.eager else 0
                engine.enter(engine.entries.popleft())
                unit = self._unit(engine)
                if not unit.busy:
                    unit.busy = True
                    clock = unit.clock
                    if clock.now_ms < engine.clock.now_ms:  # a lockstep group starts when its rank can
                        clock.idle_ms += engine.clock.now_ms - clock.now_ms
                        clock.now_ms = engine.clock.now_ms
                    heapq.heappush(steps, (clock.now_ms, unit.index))
            else:
                _, index = heapq.heappop(steps)
                engine = engines[index]
                target = self.targets_of[index]
                if target.lockstep and len(target.engines) > 1:
                    self._lockstep_step(target)
                    lead = target.engines[0]
                    if any(e.has_work() for e in target.engines):
                        heapq.heappush(steps, (lead.clock.now_ms, lead.index))
                    else:
                        lead.busy = False
                else:
                    self._step(engine, target)
                    if engine.has_work():
                        heapq.heappush(steps, (engine.clock.now_ms, index))
                    else:
                        engine.busy = False

    def end_ms(self) -> float:
        """When the replay ended: the last step of any engine (replicas still up are billed to it)."""
        return max((e.clock.now_ms for e in self.engines), default=0.0)

    def _control(self, now: float) -> None:
        """The scaling control's turn (decisions, replicas becoming ready); a replica told to
        drain that holds nothing stops at once, others when their last request finishes."""
        assert self.scaling is not None  # only a fleet that scales has control times
        self.scaling.run(now)

    def _unit(self, engine: Engine) -> Engine:
        """What the step heap holds for ``engine``: itself, or its lockstep group's first rank."""
        target = self.targets_of[engine.index]
        return target.engines[0] if target.lockstep and len(target.engines) > 1 else engine

    def _route(self, request: Request) -> None:
        """Route the fleet's next request (at its arrival, or ahead of it when eager)."""
        self._head = next(self._it, None)
        targets = self.entry_targets
        position = self.router.route(request, targets) if len(targets) > 1 else 0
        if type(position) is not int or not 0 <= position < len(targets):
            raise PluginError(  # the router's fault, not the input's
                f"{self.entry_pool.router.plugin.label()} returned {position!r} for request "
                f"{request.id!r}: not a replica position 0..{len(targets) - 1}",
            )
        target = targets[position]
        if self.scaling is not None:
            assert request.arrival_ms is not None  # a fleet's requests are timed
            self.scaling.arrived(target.pool, request, request.arrival_ms)
        if self.handoff is not None:
            request = self.handoff.prefill_request(request)
        engine = self._send(request, target)
        if self.track_prefixes and not self.events.known(engine.index):
            self.prefixes.routed(engine.index, request)
        if self.eager:
            self._ahead += 1

    def _send(self, request: Request, target: Target) -> Engine:
        """``request`` to ``target`` (one of its ranks): the decision recorded, its entry queued."""
        engine = target.pick_rank()
        self.decisions.update(f"{request.id}\t{target.name}\t{engine.rank}\n".encode())
        self.decision_counts[self.fleet_position[id(target)]] += 1
        entering = target.frontend.enter(request) if target.frontend is not None else request
        engine.entries.append(entering)
        engine.in_flight += 1
        engine.routed += 1
        self._seq += 1
        at = entering.arrival_ms
        assert at is not None  # a fleet's requests are timed
        heapq.heappush(self.entries, (at, self._seq, engine.index))
        return engine

    def _route_decode(self, request: Request) -> None:
        """A request whose KV has arrived: to a decode replica (its router, at this time)."""
        targets = self.decode_targets
        position = self.decode_router.route(request, targets) if len(targets) > 1 else 0
        if type(position) is not int or not 0 <= position < len(targets):
            raise PluginError(  # the router's fault, not the input's
                f"{self.decode_pool.router.plugin.label()} returned {position!r} for "
                f"request {request.id!r}: not a replica position 0..{len(targets) - 1}",
            )
        if self.scaling is not None:
            assert request.arrival_ms is not None  # the transfer's end
            self.scaling.arrived(targets[position].pool, request, request.arrival_ms)
        self._send(request, targets[position])

    def _next_arrival(self, engine: Engine) -> float | None:
        """When the next request may enter ``engine``: the end of the spans it may run."""
        if self.eager and not engine.transferred:
            if self.scaling is not None:
                return self._next_arrival_scaled(engine)
            while not engine.entries and self._head is not None and self._ahead < LOOKAHEAD:
                self._route(self._head)
            if engine.entries:
                return engine.entries[0].arrival_ms
            return self._head.arrival_ms if self._head is not None else None
        own = engine.entries[0].arrival_ms if engine.entries else INF
        head = self._head.arrival_ms if self._head is not None else INF
        assert own is not None and head is not None  # a fleet's requests are timed
        nxt = own if own < head else head
        if self.scaling is not None:  # the control reads the replicas' state at its time
            ctl = self.scaling.next_ms
            nxt = ctl if ctl < nxt else nxt
        if self.handoff is not None and engine.transferred:
            # a decode replica's next request comes with a transfer that has begun, or with one a
            # prefill step will begin: no sooner than the earliest prefill step still to start
            pending = self.handoff.pending[0][0] if self.handoff.pending else INF
            prefill = min((e.clock.now_ms for e in self.prefill_engines if e.busy), default=INF)
            nxt = min(nxt, pending, prefill)
        return None if nxt == INF else nxt

    def _next_arrival_scaled(self, engine: Engine) -> float | None:
        """:meth:`_next_arrival` of a router asked ahead in a fleet that scales: only requests
        that arrive before the next control time (the replicas a request may go to change only
        there), and no span past that time (the control reads the replicas' state at it)."""
        assert self.scaling is not None
        limit = self.scaling.next_ms
        head = self._head
        while not engine.entries and head is not None and self._ahead < LOOKAHEAD:
            assert head.arrival_ms is not None  # a fleet's requests are timed
            if head.arrival_ms >= limit:
                break
            self._route(head)
            head = self._head
        nxt = (
            engine.entries[0].arrival_ms if engine.entries else (head.arrival_ms if head is not None else INF)
        )
        assert nxt is not None  # a fleet's requests are timed
        return nxt if nxt < limit else limit

    def _step(self, engine: Engine, target: Target) -> None:
        start = engine.clock.now_ms
        _record, outcomes = engine.step(self._next_arrival(engine))
        self._busy(start, engine.clock.now_ms)
        if outcomes:
            self._finish(engine, target, outcomes)

    def _lockstep_step(self, target: Target) -> None:
        """Every rank of a lockstep replica steps together: the step lasts as long as
        its slowest rank, a rank with nothing to do runs a dummy step (vLLM's
        ``execute_dummy_batch`` in ``DPEngineCoreProc.run_busy_loop``; aisimulate's
        max-rank latency). Each rank takes one step at a time."""
        start = target.engines[0].clock.now_ms
        taken = []
        for e in target.engines:
            clock = e.clock
            if clock.now_ms < start:
                clock.idle_ms += start - clock.now_ms
                clock.now_ms = start
            if e.has_work():
                taken.append((e, e.take_one()))
        durations = [r.duration_ms or 0.0 for _, r in taken]
        if len(taken) < len(target.engines):
            timing = self.timing
            assert timing is not None  # a fleet runs on a timed policy (fleet_spec)
            durations.append(timing.step_ms(0, 0, 0))
        longest = max(durations)
        end = start + longest
        for e, record in taken:
            own_end = start + (record.duration_ms or 0.0)
            outcomes = [_shifted(o, own_end, end) for o in e.scheduler.pop_outcomes()]
            if e.frontend is not None:
                outcomes = [e.frontend.leave(o) for o in outcomes]
            e.settle(attrs.evolve(record, duration_ms=longest), outcomes)
            e.clock.now_ms = end
            if outcomes:
                self._finish(e, target, outcomes)
        self._busy(start, end)

    def _busy(self, start: float, end: float) -> None:
        covered = self._covered
        if start >= covered:
            self.busy_ms += end - start
        elif end > covered:
            self.busy_ms += end - covered
        if end > covered:
            self._covered = end

    def _finish(self, engine: Engine, target: Target, outcomes: list[RequestOutcome]) -> None:
        handoff = self.handoff
        decode = handoff is not None and engine.transferred
        router = self.decode_router if decode else self.router
        for o in outcomes:
            engine.in_flight -= 1
            router.finished(o, target.position)
            if self.scaling is not None and not target.in_flight:
                self.scaling.drained(target, engine.clock.now_ms)
            if handoff is not None:
                client = handoff.decoded(o) if decode else handoff.prefilled(o)
                if client is None:
                    continue
                o = client
            for fn in self._on_outcome:
                fn(o)


def _shifted(o: RequestOutcome, own_end: float, end: float) -> RequestOutcome:
    """An outcome of a lockstep rank's step, its times at the group's end: what
    the rank's scheduler stamped at the end of its own (shorter) step."""
    changes: dict[str, Any] = {}
    if o.finished_ms == own_end:
        changes["finished_ms"] = end
    if o.first_token_ms == own_end:
        changes["first_token_ms"] = end
    return attrs.evolve(o, **changes) if changes else o
