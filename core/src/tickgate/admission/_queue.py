"""A sorted waiting queue walked with a cursor that survives removals.

Every admission policy here needs the same thing underneath its own order: a
list kept sorted by a unique key (ending in the request id, so requests are
never compared), a walk the scheduler can interrupt by admitting the current
item, and removal by key for shedding. Insertion is ``insort`` (arrivals land
near the tail of their class); removal is by bisection.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from typing import Any

from ..interfaces.model import Request


def arrival_key(r: Request) -> float:
    """Arrival as one comparable number: ms when the workload is timed, else the tick."""
    return r.arrival_ms if r.arrival_ms is not None else float(r.arrival_tick)


def fcfs_key(r: Request) -> tuple[int, float, str]:
    """The default order: (priority, arrival, id), as priority-fcfs."""
    return (r.priority, arrival_key(r), r.id)


class OrderedQueue:
    """Requests sorted by a caller-given unique key; one walk at a time."""

    __slots__ = ("_cursor", "_keys", "items")

    def __init__(self) -> None:
        self.items: list[tuple[Any, Request]] = []
        self._keys: dict[str, Any] = {}
        self._cursor = 0

    def push(self, key: Any, request: Request) -> int:
        """Insert; returns the position (how many requests are ahead of it)."""
        insort(self.items, (key, request))
        self._keys[request.id] = key
        return bisect_left(self.items, (key,))

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._keys

    def __len__(self) -> int:
        return len(self.items)

    def remove(self, request: Request) -> bool:
        """Remove ``request`` if queued; a walk in progress keeps its place."""
        key = self._keys.pop(request.id, None)
        if key is None:
            return False
        i = bisect_left(self.items, (key,))
        del self.items[i]
        if i < self._cursor:
            self._cursor -= 1
        return True

    def walk(self) -> Iterator[Request]:
        """Yield requests in order; removing the yielded one does not skip the next."""
        self._cursor = 0
        items = self.items
        while self._cursor < len(items):
            request = items[self._cursor][1]
            self._cursor += 1
            yield request

    def head(self) -> Request | None:
        return self.items[0][1] if self.items else None
