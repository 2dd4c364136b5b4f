"""The ``priority-fcfs`` admission policy: stable (priority, arrival, id) order."""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterator, Mapping
from typing import Any

from ..interfaces import AdmissionContext, AdmissionPolicy
from ..interfaces.model import Request


def arrival_key(r: Request) -> float:
    return r.arrival_ms if r.arrival_ms is not None else float(r.arrival_tick)


class PriorityFcfs(AdmissionPolicy):
    """Lower priority value first, then earlier arrival, then id.

    The queue is a sorted list; arrivals come in arrival order so insertion is
    near the tail within a priority, and admission deletes by position.
    """

    name = "priority-fcfs"
    description = "Stable order by priority (lower first), arrival, then id."

    def __init__(self) -> None:
        self._queue: list[tuple[int, float, str, Request]] = []
        self._cursor = 0

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: AdmissionContext) -> PriorityFcfs:
        return cls()

    def enqueue(self, request: Request, tick: int) -> str | None:
        insort(self._queue, (request.priority, arrival_key(request), request.id, request))
        return None

    def candidates(self, tick: int) -> Iterator[Request]:
        self._cursor = 0
        queue = self._queue
        while self._cursor < len(queue):
            item = queue[self._cursor]
            self._cursor += 1
            yield item[3]

    def admitted(self, request: Request, tick: int) -> None:
        i = self._cursor - 1
        queue = self._queue
        if not (0 <= i < len(queue) and queue[i][3] is request):
            i = queue.index((request.priority, arrival_key(request), request.id, request))
        del queue[i]
        if i < self._cursor:
            self._cursor -= 1

    def remove(self, request: Request) -> None:
        self._queue.remove((request.priority, arrival_key(request), request.id, request))

    def __len__(self) -> int:
        return len(self._queue)
