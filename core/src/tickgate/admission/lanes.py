"""The ``sla-lanes`` admission policy: SLA lanes with queue-wait limits and brownout.

Serving stacks put interactive traffic ahead of batch traffic with *lanes*:
one queue per lane, strict order between lanes (the first lane listed goes
first), (priority, arrival, id) inside a lane. Each lane bounds its queue:

* ``max_depth``: an arrival that finds its lane full is rejected at once;
* ``max_queue_wait_ticks`` / ``max_queue_wait_ms``: a request that has waited
  longer is shed (a late answer to an interactive request is worth nothing,
  and the client has usually retried); ms are measured on the engine clock,
  i.e. through the policy's timing model;
* ``brownout.max_queued``: when the whole queue is deeper than this the engine
  is overloaded; the lowest lane that has requests is shed first (newest
  first: they have sunk the least wait), then the next lowest. The first
  lane is never browned out.

Everything shed is reported as rejected with the reason, never dropped.
Expiries sit in heaps keyed by the step (or ms) at which they fall due, so a
step where nothing expires costs nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Any

from ..interfaces import AdmissionContext, AdmissionPolicy, Clock
from ..interfaces.model import Request
from ..util.errors import ConfigError
from ._queue import OrderedQueue, fcfs_key

_LANE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "max_depth": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000000,
            "description": "Queued requests this lane holds; arrivals beyond are rejected.",
        },
        "max_queue_wait_ticks": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1000000000,
            "description": "Steps a request may wait before it is shed.",
        },
        "max_queue_wait_ms": {
            "type": "number",
            "minimum": 0,
            "maximum": 1e12,
            "description": "Wait in ms (engine clock, needs a timing section).",
        },
    },
    "not": {"required": ["max_queue_wait_ticks", "max_queue_wait_ms"]},
}

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "lanes": {
            "type": "array",
            "minItems": 1,
            "maxItems": 64,
            "items": _LANE,
            "description": "Lanes, most urgent first. Default: realtime, standard, bulk.",
        },
        "default_lane": {
            "type": "string",
            "minLength": 1,
            "description": "Lane for requests without (or with an unknown) lane; default: the last.",
        },
        "brownout": {
            "type": "object",
            "additionalProperties": False,
            "required": ["max_queued"],
            "properties": {
                "max_queued": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 1000000000,
                    "description": "Total queued requests above which lower lanes are shed.",
                }
            },
        },
    },
}

DEFAULT_LANES = ({"name": "realtime"}, {"name": "standard"}, {"name": "bulk"})


class _Lane:
    __slots__ = ("max_depth", "name", "queue", "rank", "wait_ms", "wait_ticks")

    def __init__(self, spec: Mapping[str, Any], rank: int) -> None:
        self.name: str = spec["name"]
        self.rank = rank
        self.queue = OrderedQueue()
        self.max_depth: int | None = spec.get("max_depth")
        self.wait_ticks: int | None = spec.get("max_queue_wait_ticks")
        self.wait_ms: float | None = spec.get("max_queue_wait_ms")


class SlaLanes(AdmissionPolicy):
    name = "sla-lanes"
    description = (
        "Per-lane queues (realtime/standard/bulk) with wait and depth limits; brownout sheds the lowest lane."
    )
    options_schema = OPTIONS_SCHEMA

    def __init__(self, options: Mapping[str, Any], clock: Clock | None) -> None:
        specs = options.get("lanes", DEFAULT_LANES)
        names = [s["name"] for s in specs]
        if len(set(names)) != len(names):
            raise ConfigError(f'admission "sla-lanes": lane names must be unique, got {names}')
        self.lanes = [_Lane(s, i) for i, s in enumerate(specs)]
        self.by_name = {lane.name: lane for lane in self.lanes}
        default = options.get("default_lane", names[-1])
        if default not in self.by_name:
            raise ConfigError(f'admission "sla-lanes": default_lane "{default}" is not one of {names}')
        self.default = self.by_name[default]
        if any(lane.wait_ms is not None for lane in self.lanes) and clock is None:
            raise ConfigError(
                'admission "sla-lanes": max_queue_wait_ms needs a scheduler that shares its clock'
            )
        self.clock = clock
        brownout = options.get("brownout")
        self.max_queued: int | None = brownout["max_queued"] if brownout else None
        self.where: dict[str, _Lane] = {}
        self.expiry_ticks: list[tuple[int, int, str]] = []
        self.expiry_ms: list[tuple[float, int, str]] = []
        self.requests: dict[str, Request] = {}
        self.seq = 0
        self.counts: dict[str, int] = {}

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AdmissionContext) -> SlaLanes:
        return cls(options, ctx.clock)

    def lane_of(self, request: Request) -> _Lane:
        return self.by_name.get(request.lane, self.default) if request.lane is not None else self.default

    def enqueue(self, request: Request, tick: int) -> str | None:
        if request.id in self.where:
            return "duplicate request id"
        lane = self.lane_of(request)
        if lane.max_depth is not None and len(lane.queue) >= lane.max_depth:
            return self._count(f"lane {lane.name} full (max_depth {lane.max_depth})")
        lane.queue.push(fcfs_key(request), request)
        self.where[request.id] = lane
        self.requests[request.id] = request
        self.seq += 1
        if lane.wait_ticks is not None:
            heapq.heappush(self.expiry_ticks, (tick + lane.wait_ticks + 1, self.seq, request.id))
        if lane.wait_ms is not None:
            assert self.clock is not None
            heapq.heappush(self.expiry_ms, (self.clock.now_ms + lane.wait_ms, self.seq, request.id))
        return None

    def shed(self, tick: int) -> list[tuple[Request, str]]:
        out: list[tuple[Request, str]] = []
        while self.expiry_ticks and self.expiry_ticks[0][0] <= tick:
            _, _, rid = heapq.heappop(self.expiry_ticks)
            self._expire(rid, "ticks", out)
        if self.expiry_ms:
            assert self.clock is not None
            now = self.clock.now_ms
            while self.expiry_ms and self.expiry_ms[0][0] < now:
                _, _, rid = heapq.heappop(self.expiry_ms)
                self._expire(rid, "ms", out)
        if self.max_queued is not None and len(self.where) > self.max_queued:
            self._brownout(out)
        return out

    def _expire(self, rid: str, unit: str, out: list[tuple[Request, str]]) -> None:
        lane = self.where.get(rid)
        if lane is None:  # admitted or shed already: the heap entry is stale
            return
        limit = lane.wait_ticks if unit == "ticks" else lane.wait_ms
        out.append((self._drop(rid), self._count(f"lane {lane.name}: queue wait over {limit:g} {unit}")))

    def _brownout(self, out: list[tuple[Request, str]]) -> None:
        assert self.max_queued is not None
        for lane in reversed(self.lanes[1:]):
            while lane.queue and len(self.where) > self.max_queued:
                newest = lane.queue.items[-1][1]
                out.append(
                    (
                        self._drop(newest.id),
                        self._count(f"brownout: lane {lane.name} shed (queue over {self.max_queued})"),
                    )
                )
            if len(self.where) <= self.max_queued:
                return

    def _drop(self, rid: str) -> Request:
        lane = self.where.pop(rid)
        request = self.requests.pop(rid)
        lane.queue.remove(request)
        return request

    def _count(self, reason: str) -> str:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        return reason

    def candidates(self, tick: int) -> Iterator[Request]:
        for lane in self.lanes:
            yield from lane.queue.walk()

    def admitted(self, request: Request, tick: int) -> None:
        self._drop(request.id)

    def summary(self) -> Mapping[str, Any]:
        return {"lanes": [lane.name for lane in self.lanes], "refused": dict(sorted(self.counts.items()))}

    def __len__(self) -> int:
        return len(self.where)
