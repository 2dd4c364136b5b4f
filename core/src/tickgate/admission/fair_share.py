"""The ``fair-share`` admission policy: weighted fair share of admitted tokens, with aging.

Each tenant has a weight (``weights``; others get ``default_weight``) and a
virtual time: the tokens admitted for it (prompt + max output, what it will
occupy) divided by its weight. Admission walks tenants in increasing virtual
time, each tenant's own queue in (priority, arrival, id) order, and re-ranks
a tenant as soon as one of its requests is admitted. While several tenants
are backlogged their admitted tokens therefore converge to the weight ratio
(start-time fair queuing). A tenant that becomes backlogged again starts at
the smallest virtual time among the backlogged tenants, so an idle period
earns it no burst.

Aging: a request that has waited ``aging_ticks`` steps goes ahead of the fair
order (oldest first), so a low-weight tenant never starves. Ageing is
event-driven: a heap keyed by the step at which each request ages.
Requests without a tenant form the tenant ``"-"``.

``summary()`` reports each tenant's share of the tokens admitted while two or
more tenants were backlogged: the share the weights govern.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from typing import Any

from ..interfaces import AdmissionContext, AdmissionPolicy
from ..interfaces.model import Request
from ._queue import OrderedQueue, fcfs_key

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "weights": {
            "type": "object",
            "additionalProperties": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9},
            "description": "Tenant name -> weight.",
        },
        "default_weight": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1e9,
            "description": "Weight of tenants not listed (default 1).",
        },
        "aging_ticks": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000000000,
            "description": "Steps after which a waiting request goes ahead of the fair order (default 256).",
        },
    },
}

NO_TENANT = "-"


class FairShare(AdmissionPolicy):
    name = "fair-share"
    description = "Weighted fair share of admitted tokens across tenants, with aging so no tenant starves."
    options_schema = OPTIONS_SCHEMA

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.weights: dict[str, float] = {k: float(v) for k, v in options.get("weights", {}).items()}
        self.default_weight = float(options.get("default_weight", 1.0))
        self.aging = int(options.get("aging_ticks", 256))
        self.queues: dict[str, OrderedQueue] = {}
        self.vtime: dict[str, float] = {}
        self.aged = OrderedQueue()
        self.ages: list[tuple[int, int, str]] = []  # (step it ages at, seq, id)
        self.where: dict[str, OrderedQueue] = {}
        self.requests: dict[str, Request] = {}
        self.backlog: dict[str, int] = {}  # tenant -> queued requests (fair or aged)
        self.seq = 0
        self.busy = 0  # tenants with queued requests
        self.system_vtime = 0.0  # virtual time of the latest admission
        self.contended: dict[str, int] = {}
        self.admitted_tokens: dict[str, int] = {}
        self.aged_admissions = 0

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AdmissionContext) -> FairShare:
        return cls(options)

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, self.default_weight)

    @staticmethod
    def tenant(r: Request) -> str:
        return r.tenant if r.tenant is not None else NO_TENANT

    def enqueue(self, request: Request, tick: int) -> str | None:
        if request.id in self.where:
            return "duplicate request id"
        t = self.tenant(request)
        if not self.backlog.get(t):
            busy = [self.vtime[o] for o, n in self.backlog.items() if n]
            self.vtime[t] = max(self.vtime.get(t, 0.0), min(busy) if busy else self.system_vtime)
            self.busy += 1
        queue = self.queues.get(t)
        if queue is None:
            queue = self.queues[t] = OrderedQueue()
        queue.push(fcfs_key(request), request)
        self.where[request.id] = queue
        self.requests[request.id] = request
        self.backlog[t] = self.backlog.get(t, 0) + 1
        self.seq += 1
        heapq.heappush(self.ages, (tick + self.aging, self.seq, request.id))
        return None

    def _age(self, tick: int) -> None:
        while self.ages and self.ages[0][0] <= tick:
            _, seq, rid = heapq.heappop(self.ages)
            queue = self.where.get(rid)
            if queue is None:
                continue  # admitted already
            request = self.requests[rid]
            queue.remove(request)
            self.aged.push((seq,), request)  # seq: queue-join order
            self.where[rid] = self.aged

    def candidates(self, tick: int) -> Iterator[Request]:
        self._age(tick)
        yield from self.aged.walk()
        heap = [(self.vtime[t], t) for t, q in self.queues.items() if q]
        heapq.heapify(heap)
        pos = dict.fromkeys(self.queues, 0)
        while heap:
            _, t = heapq.heappop(heap)
            queue = self.queues[t]
            i = pos[t]
            if i >= len(queue):
                continue
            request = queue.items[i][1]
            yield request
            if request.id in self.where:  # passed over: look at the tenant's next one
                pos[t] = i + 1
            if pos[t] < len(queue):
                heapq.heappush(heap, (self.vtime[t], t))

    def admitted(self, request: Request, tick: int) -> None:
        queue = self.where.pop(request.id)
        del self.requests[request.id]
        if queue is self.aged:
            self.aged_admissions += 1
        queue.remove(request)
        t = self.tenant(request)
        tokens = request.prompt_tokens + request.max_output_tokens
        if self.busy >= 2:
            self.contended[t] = self.contended.get(t, 0) + tokens
        self.backlog[t] -= 1
        if not self.backlog[t]:
            self.busy -= 1
        self.system_vtime = max(self.system_vtime, self.vtime[t])
        self.vtime[t] += tokens / self.weight(t)
        self.admitted_tokens[t] = self.admitted_tokens.get(t, 0) + tokens

    def summary(self) -> Mapping[str, Any]:
        total = sum(self.contended.values())
        tenants = sorted(set(self.admitted_tokens) | set(self.queues))
        wsum = sum(self.weight(t) for t in tenants)
        return {
            "tenants": {
                t: {
                    "weight": self.weight(t),
                    "weight_share": round(self.weight(t) / wsum, 6) if wsum else 0.0,
                    "admitted_tokens": self.admitted_tokens.get(t, 0),
                    "contended_tokens": self.contended.get(t, 0),
                    "contended_token_share": round(self.contended.get(t, 0) / total, 6) if total else 0.0,
                }
                for t in tenants
            },
            "aged_admissions": self.aged_admissions,
        }

    def __len__(self) -> int:
        return len(self.where)
