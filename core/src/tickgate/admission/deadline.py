"""The ``deadline-edf`` admission policy: deadline-aware admission, earliest deadline first.

A request may carry ``deadline_tick`` (finish before that step) or
``deadline_ms`` (finish by that time on the engine clock). On arrival the
policy estimates when the request would finish if admitted now, from

* the backlog ahead of it: requests already running (their remaining output,
  at least one token) and deadline requests queued ahead of it in EDF order;
* the engine's decode rate: ``decode_slots`` sequences per step, round-robin,
  each at most one token per step, so the request finishes after
  ``max(own, ceil((sum of min(other, own)) + own) / slots))`` steps;
* KV: if its pages are not free once those ahead are in, it waits at least
  until running requests free enough pages (each needs its remaining steps).

The estimate is optimistic on purpose (remaining output counts every elapsed
step as a decoded token): a *strict* request is rejected only when even
that estimate misses, i.e. when it cannot make it, and that happens on
arrival, before any KV is reserved. A strict request that becomes hopeless
while queued (its latest possible start passes: a heap keyed by that step)
is shed with the reason. A best-effort request is admitted anyway; when the
estimate at admission misses, the outcome is flagged ``deadline_at_risk``.

Order: earliest deadline first; requests without a deadline after all that
have one; ties by (priority, arrival, id).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from typing import Any

from ..interfaces import AdmissionContext, AdmissionPolicy, KvAllocator
from ..interfaces.model import Request
from ..util.errors import ConfigError
from ._queue import OrderedQueue, fcfs_key

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "reject_strict": {
            "type": "boolean",
            "description": "Reject strict requests that cannot make their deadline "
            "(default true; false only flags them, to compare).",
        },
        "flag": {
            "type": "string",
            "minLength": 1,
            "pattern": "^[a-z0-9_]+$",
            "description": "Flag put on a request admitted although it is predicted to miss "
            "(default deadline_at_risk).",
        },
    },
}

INF = math.inf
REJECT_REASON = "deadline: cannot finish in time (estimated from the backlog ahead)"
SHED_REASON = "deadline: latest start passed while queued"


class DeadlineEdf(AdmissionPolicy):
    name = "deadline-edf"
    description = (
        "Earliest deadline first; strict requests that cannot make it are rejected, best-effort ones flagged."
    )
    options_schema = OPTIONS_SCHEMA

    def __init__(self, options: Mapping[str, Any], ctx: AdmissionContext) -> None:
        if ctx.decode_slots is None or ctx.allocator is None:
            raise ConfigError(
                'admission "deadline-edf" estimates completion from the decode rate and '
                "the KV cache; this scheduler does not share them"
            )
        self.slots: int = ctx.decode_slots
        self.kv: KvAllocator = ctx.allocator
        self.page_size = ctx.page_size
        self.timing = ctx.timing
        self.clock = ctx.clock
        self.reject_strict = options.get("reject_strict", True)
        self.flag = options.get("flag", "deadline_at_risk")
        self.queue = OrderedQueue()
        self.requests: dict[str, Request] = {}
        # running requests: id -> (admitted tick, max output, pages)
        self.active: dict[str, tuple[int, int, int]] = {}
        self.latest_tick: list[tuple[int, str]] = []  # (first step too late to start, id)
        self.latest_ms: list[tuple[float, str]] = []
        self.stats = {"rejected": 0, "shed": 0, "flagged": 0, "admitted_with_deadline": 0}

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AdmissionContext) -> DeadlineEdf:
        return cls(options, ctx)

    @staticmethod
    def key(r: Request) -> tuple[float, float, int, float, str]:
        dt = r.deadline_tick if r.deadline_tick is not None else INF
        dm = r.deadline_ms if r.deadline_ms is not None else INF
        return (dt, dm, *fcfs_key(r))

    def pages(self, r: Request) -> int:
        return -(-(r.prompt_tokens + r.max_output_tokens) // self.page_size)

    # -- estimate ---------------------------------------------------------------
    def finish_tick(self, r: Request, tick: int, ahead: list[Request]) -> int:
        """Optimistic step at which ``r`` completes if admitted at ``tick`` after ``ahead``."""
        own = r.max_output_tokens
        rem = [(max(1, out - (tick - at)), pages) for at, out, pages in self.active.values()]
        shared = sum(min(left, own) for left, _ in rem) + sum(min(a.max_output_tokens, own) for a in ahead)
        decode = max(own, -(-(shared + own) // self.slots))
        start = tick
        short = self.pages(r) + sum(self.pages(a) for a in ahead) - self.kv.free_pages
        if short > 0:
            for left, pages in sorted(rem):
                short -= pages
                if short <= 0:
                    start = tick + left + 1  # freed at the end of its last step
                    break
            else:
                start = tick + max((left for left, _ in rem), default=0) + 1
        return start + decode

    def misses(self, r: Request, tick: int, ahead: list[Request]) -> bool:
        finish = self.finish_tick(r, tick, ahead)
        if r.deadline_tick is not None and finish + 1 > r.deadline_tick:
            return True
        if r.deadline_ms is not None and self.timing is not None and self.clock is not None:
            steps = finish - tick + 1
            return self.clock.now_ms + steps * self._step_ms() > r.deadline_ms
        return False

    def _step_ms(self) -> float:
        """A lower bound on one step: fixed cost plus the decode of what is running."""
        assert self.timing is not None
        return self.timing.step_ms(0, min(self.slots, max(1, len(self.active))), 0)

    # -- protocol -----------------------------------------------------------------
    def enqueue(self, request: Request, tick: int) -> str | None:
        if request.id in self.queue:
            return "duplicate request id"
        has_deadline = request.deadline_tick is not None or request.deadline_ms is not None
        if has_deadline and request.strict_deadline and self.reject_strict:
            # Deadline requests sort before those without, so the ones ahead are a prefix.
            ahead = [r for _, r in self.queue.items[: bisect_left(self.queue.items, (self.key(request),))]]
            if self.misses(request, tick, ahead):
                self.stats["rejected"] += 1
                return REJECT_REASON
        self.queue.push(self.key(request), request)
        self.requests[request.id] = request
        if request.strict_deadline and self.reject_strict:
            own = request.max_output_tokens
            if request.deadline_tick is not None:
                heapq.heappush(self.latest_tick, (request.deadline_tick - own, request.id))
            if request.deadline_ms is not None and self.timing is not None and self.clock is not None:
                heapq.heappush(
                    self.latest_ms, (request.deadline_ms - (own + 1) * self._step_floor(), request.id)
                )
        return None

    def _step_floor(self) -> float:
        assert self.timing is not None
        return self.timing.step_ms(0, 1, 0)

    def shed(self, tick: int) -> list[tuple[Request, str]]:
        out: list[tuple[Request, str]] = []
        while self.latest_tick and self.latest_tick[0][0] <= tick:
            self._shed(heapq.heappop(self.latest_tick)[1], out)
        if self.latest_ms:
            assert self.clock is not None
            while self.latest_ms and self.latest_ms[0][0] < self.clock.now_ms:
                self._shed(heapq.heappop(self.latest_ms)[1], out)
        return out

    def _shed(self, rid: str, out: list[tuple[Request, str]]) -> None:
        request = self.requests.pop(rid, None)
        if request is None:  # admitted already: the heap entry is stale
            return
        self.queue.remove(request)
        self.stats["shed"] += 1
        out.append((request, SHED_REASON))

    def candidates(self, tick: int) -> Iterator[Request]:
        return self.queue.walk()

    def admitted(self, request: Request, tick: int) -> tuple[str, ...] | None:
        self.queue.remove(request)
        self.requests.pop(request.id, None)
        flags: tuple[str, ...] | None = None
        if request.deadline_tick is not None or request.deadline_ms is not None:
            self.stats["admitted_with_deadline"] += 1
            if self.misses(request, tick, []):
                self.stats["flagged"] += 1
                flags = (self.flag,)
        self.active[request.id] = (tick, request.max_output_tokens, self.pages(request))
        return flags

    def finished(self, request: Request, tick: int) -> None:
        self.active.pop(request.id, None)

    def summary(self) -> Mapping[str, Any]:
        return dict(self.stats)

    def __len__(self) -> int:
        return len(self.queue)
