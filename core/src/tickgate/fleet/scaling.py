"""A fleet that scales: each pool's autoscaler, its replicas' lifecycle, and the signals it reads.

The fleet's clock calls :meth:`Scaling.run` whenever its next control time comes
(a decision every ``interval_s``, or a starting replica becoming ready) before any
arrival, entry or step at that time. What happens, as a Kubernetes Deployment
with an autoscaler does it (docs/autoscaling.md cites the pages followed):

- **up**: the pool gets new replicas (new names: a replica that stopped is never
  reused, its caches are gone). Each is *starting* from the decision:
  provisioning, model load and warm-up (``cluster.lifecycle``); it is billed from
  the decision and joins the router's list only once ready.
- **down**: replicas are chosen as a ReplicaSet chooses pods to delete: starting
  ones first (they serve nothing: stopped at once), then ready ones, newest first.
  A ready replica leaves the router's list at once and *drains*: it finishes what
  it holds and stops when its last request has finished.
- **bounds**: the autoscaler's recommendation is clamped to the pool's
  ``min_replicas`` / ``max_replicas``; the autoscaler keeps its own damping
  (the ``hpa`` plugin's stabilization windows and rate policies).

Every decision and transition is an event of the report's ``autoscaling`` section,
with the metric acted on and its value; every decision time is a row of its
``timeline`` (what the HTML report draws).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from typing import Any

from ..interfaces.autoscaling import AutoscalerContext, PoolSignals, ScaleDecision
from ..interfaces.model import Request, RequestOutcome
from ..util.errors import PluginError
from ..util.quantile import quantile
from .replica import Target
from .spec import AutoscaleSpec, PoolSpec

__all__ = ["Scaling"]

INF = float("inf")
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0))


class _Life:
    """When one replica was asked for, served, was drained and stopped (ms)."""

    __slots__ = ("drain_ms", "ready_ms", "start_ms", "stop_ms", "target")

    def __init__(self, target: Target, start_ms: float, ready_ms: float) -> None:
        self.target = target
        self.start_ms = start_ms
        self.ready_ms = ready_ms
        self.drain_ms: float | None = None
        self.stop_ms: float | None = None

    def to_json(self, end_ms: float) -> dict[str, Any]:
        served = (
            self.ready_ms if self.ready_ms <= (self.stop_ms if self.stop_ms is not None else INF) else None
        )
        return {
            "replica": self.target.name,
            "pool": self.target.pool,
            "start_s": _s(self.start_ms),
            "ready_s": _s(served) if served is not None else None,
            "drain_s": _s(self.drain_ms) if self.drain_ms is not None else None,
            "stop_s": _s(self.stop_ms if self.stop_ms is not None else max(end_ms, self.start_ms)),
        }


class _Pool:
    """One pool's autoscaler, replicas by state, and the windows its signals come from."""

    def __init__(self, spec: PoolSpec, autoscaler: Any, bounds: tuple[int, int], ready: list[Target]) -> None:
        self.spec = spec
        self.autoscaler = autoscaler
        self.min, self.max = bounds
        #: the router's list: ready replicas in pool order (the same list object the fleet routes over)
        self.ready = ready
        self.starting: list[Target] = []
        self.draining: list[Target] = []
        self.arrivals: deque[tuple[float, int, int]] = deque()  # (ms, prompt tokens, max output tokens)
        self.finished: deque[tuple[float, float, float | None]] = deque()  # (ms, ttft, mean itl)


class Scaling:
    """Every scaled pool of a fleet; ``add_target(pool)`` builds a replica (not yet routed to)."""

    def __init__(
        self,
        spec: AutoscaleSpec,
        pools: list[tuple[PoolSpec, list[Target]]],
        add_target: Callable[[PoolSpec], Target],
        seed: int,
    ) -> None:
        self.spec = spec
        self.add_target = add_target
        self.pools: list[_Pool] = []
        self.by_name: dict[str, _Pool] = {}
        self.lives: dict[str, _Life] = {}
        self.events: list[dict[str, Any]] = []
        self.timeline: list[dict[str, Any]] = []
        info = spec.autoscaler.plugin
        for pool, ready in pools:
            bounds = spec.bounds[pool.name]
            ctx = AutoscalerContext(
                pool=pool.name,
                role=pool.role,
                min_replicas=bounds[0],
                max_replicas=bounds[1],
                interval_ms=spec.interval_ms,
                window_ms=spec.window_ms,
                startup_ms=spec.startup_ms,
                timing=pool.policy.timing,
                scheduler_options=dict(pool.scheduler.options),
                seed=seed,
                ranks=pool.data_parallel_size,
                kv_tokens_per_rank=_kv_tokens(ready[0]) if ready else None,
            )
            autoscaler = pool.policy.build_plugin(
                info,
                lambda ctx=ctx: info.obj.build(spec.autoscaler.options, ctx),
                "cluster",
                "autoscaler",
                "name",
            )
            state = _Pool(pool, autoscaler, bounds, ready)
            for t in ready:
                self.lives[t.name] = _Life(t, 0.0, 0.0)
            self.pools.append(state)
            self.by_name[pool.name] = state
        self.next_decision = 0.0
        #: (ready time, order, pool, target) of the replicas starting, earliest first
        self.pending: list[tuple[float, int, str, Target]] = []
        self.order = 0

    @property
    def next_ms(self) -> float:
        ready = self.pending[0][0] if self.pending else INF
        return ready if ready < self.next_decision else self.next_decision

    # -- what the fleet tells it --------------------------------------------------------
    def arrived(self, pool: str, request: Request, at_ms: float) -> None:
        state = self.by_name.get(pool)
        if state is not None:
            state.arrivals.append((at_ms, request.prompt_tokens, request.max_output_tokens))

    def outcome(self, o: RequestOutcome) -> None:
        """A request as the client saw it finish: every pool's latency windows."""
        if o.finished_ms is None or o.first_token_ms is None or o.arrival_ms is None:
            return
        ttft = o.first_token_ms - o.arrival_ms
        itl = (o.finished_ms - o.first_token_ms) / (o.output_tokens - 1) if o.output_tokens > 1 else None
        for state in self.pools:
            state.finished.append((o.finished_ms, ttft, itl))

    def drained(self, target: Target, at_ms: float) -> bool:
        """Whether ``target`` was draining and has just finished its last request (it stops)."""
        state = self.by_name[target.pool]
        if target.in_flight or target not in state.draining:
            return False
        state.draining.remove(target)
        self._stop(target, at_ms, "drained: its last request finished")
        return True

    # -- the control loop -------------------------------------------------------------
    def run(self, now: float) -> None:
        """Everything due at ``now``: replicas that become ready, then a decision."""
        while self.pending and self.pending[0][0] <= now:
            at, _, pool, target = self.pending.pop(0)
            state = self.by_name[pool]
            if target in state.starting:  # not cancelled while it started
                self._ready(state, target, at)
        if self.next_decision <= now:
            for state in self.pools:
                self._decide(state, now)
            self.next_decision = now + self.spec.interval_ms

    def _decide(self, state: _Pool, now: float) -> None:
        signals = self._signals(state, now)
        decision = state.autoscaler.decide(signals)
        if not isinstance(decision, ScaleDecision) or type(decision.replicas) is not int:
            raise PluginError(
                f"{self.spec.autoscaler.plugin.label()} returned {decision!r} for pool "
                f"{state.spec.name!r}: not a ScaleDecision with an int replicas"
            )
        wanted = min(max(decision.replicas, state.min), state.max)
        current = signals.current
        self.timeline.append(
            {
                "t_s": _s(now),
                "pool": state.spec.name,
                "ready": signals.ready,
                "starting": signals.starting,
                "draining": signals.draining,
                "desired": wanted,
                "metric": decision.metric,
                "value": _round(decision.value),
                "arrival_rate": round(signals.arrival_rate, 6),
                "waiting": signals.waiting,
                "running": signals.running,
                "kv_usage": round(signals.kv_usage, 6),
                "ttft_p99_ms": _round(signals.ttft_ms.get("p99")),
                "itl_p99_ms": _round(signals.itl_ms.get("p99")),
            }
        )
        why = {"reason": decision.reason, "metric": decision.metric, "value": _round(decision.value)}
        if wanted > current:
            for _ in range(wanted - current):
                self._start(state, now, why)
        elif wanted < current:
            for _ in range(current - wanted):
                self._remove(state, now, why)

    def _start(self, state: _Pool, now: float, why: dict[str, Any]) -> None:
        target = self.add_target(state.spec)
        ready_at = now + self.spec.startup_ms
        self.lives[target.name] = _Life(target, now, ready_at)
        self._event(now, target, "start", **why)
        state.starting.append(target)
        if ready_at <= now:  # a start that takes no time: ready at the decision itself
            self._ready(state, target, now)
            return
        self.order += 1
        self.pending.append((ready_at, self.order, state.spec.name, target))
        self.pending.sort(key=lambda p: (p[0], p[1]))

    def _ready(self, state: _Pool, target: Target, at: float) -> None:
        state.starting.remove(target)
        bisect.insort(state.ready, target, key=lambda t: t.position)
        self._event(at, target, "ready", "provisioned, loaded and warmed up")

    def _remove(self, state: _Pool, now: float, why: dict[str, Any]) -> None:
        """One replica fewer: the newest starting one, else the newest ready one drains."""
        if state.starting:
            target = state.starting.pop()
            self._event(now, target, "cancel", **why)
            self._stop(target, now, "cancelled before it served")
            return
        target = max(state.ready, key=lambda t: t.position)
        state.ready.remove(target)
        self.lives[target.name].drain_ms = now
        self._event(now, target, "drain", **why)
        if target.in_flight:
            state.draining.append(target)
        else:
            self._stop(target, now, "drained: it held no request")

    def _stop(self, target: Target, now: float, reason: str) -> None:
        self.lives[target.name].stop_ms = now
        self._event(now, target, "stop", reason)

    def _event(
        self,
        now: float,
        target: Target,
        action: str,
        reason: str,
        metric: str | None = None,
        value: Any = None,
    ) -> None:
        event: dict[str, Any] = {
            "t_s": _s(now),
            "pool": target.pool,
            "replica": target.name,
            "action": action,
        }
        event["reason"] = reason
        if metric is not None:
            event["metric"] = metric
            event["value"] = value
        self.events.append(event)

    def _signals(self, state: _Pool, now: float) -> PoolSignals:
        window = self.spec.window_ms
        since = now - window
        arrivals, finished = state.arrivals, state.finished
        while arrivals and arrivals[0][0] < since:
            arrivals.popleft()
        while finished and finished[0][0] < since:
            finished.popleft()
        span = min(window, now) / 1000.0
        n = len(arrivals)
        ready = state.ready
        used = sum(t.kv_used_pages() for t in ready)
        capacity = sum(t.kv_capacity_pages() for t in ready)
        return PoolSignals(
            pool=state.spec.name,
            role=state.spec.role,
            now_ms=now,
            window_ms=window,
            ready=len(ready),
            starting=len(state.starting),
            draining=len(state.draining),
            waiting=sum(t.waiting for t in ready),
            running=sum(t.running for t in ready),
            kv_usage=used / capacity if capacity else 0.0,
            arrivals=n,
            arrival_rate=n / span if span > 0 else 0.0,
            mean_prompt_tokens=sum(a[1] for a in arrivals) / n if n else 0.0,
            mean_output_tokens=sum(a[2] for a in arrivals) / n if n else 0.0,
            ttft_ms=_percentiles([f[1] for f in finished]),
            itl_ms=_percentiles([f[2] for f in finished if f[2] is not None]),
        )

    # -- the report ---------------------------------------------------------------------
    def to_json(self, end_ms: float) -> dict[str, Any]:
        """The report's ``autoscaling`` section (``end_ms``: when the replay ended; replicas
        still up are billed until then)."""
        replicas = [life.to_json(end_ms) for life in self.lives.values()]
        return {
            **self.spec.to_json(),
            "end_s": _s(end_ms),
            "replicas": replicas,
            "peak_replicas": _peaks(self.lives.values(), end_ms),
            "events": self.events,
            "timeline": self.timeline,
        }


def _kv_tokens(target: Target) -> int | None:
    """The KV tokens one rank of ``target`` holds: its pages x tokens per page (``block_size``
    or ``page_size``), None when the scheduler names neither."""
    scheduler = target.engines[0].scheduler
    page = getattr(scheduler, "block_size", None) or getattr(scheduler, "page_size", None)
    if not isinstance(page, int) or page <= 0:
        return None
    return int(scheduler.kv_capacity_pages()) * page


def _peaks(lives: Any, end_ms: float) -> dict[str, int]:
    """Per pool, the most replicas up (starting, serving or draining) at once."""
    changes: dict[str, list[tuple[float, int]]] = {}
    for life in lives:
        stop = life.stop_ms if life.stop_ms is not None else end_ms
        changes.setdefault(life.target.pool, []).extend([(life.start_ms, 1), (stop, -1)])
    out = {}
    for pool, points in sorted(changes.items()):
        up = peak = 0
        for _, delta in sorted(points, key=lambda p: (p[0], p[1])):
            up += delta
            peak = max(peak, up)
        out[pool] = peak
    return out


def _percentiles(values: list[float]) -> dict[str, float]:
    """The house quantile (:mod:`tickgate.util.quantile`), as the replay report has it."""
    if not values:
        return {}
    ordered = sorted(values)
    return {name: quantile(ordered, q / 100.0) for name, q in PERCENTILES}


def _s(ms: float) -> float:
    return round(ms / 1000.0, 6)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)
