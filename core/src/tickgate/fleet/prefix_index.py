"""What each replica holds in its prefix cache, as a router asks it.

Without KV events (a scheduler that publishes none) the fleet keeps the
record Dynamo's router keeps in its no-events mode and llm-d's approximate
prefix scorer keeps (docs/design/fleets-sources.md §2, §3): the prefix blocks
of the requests routed to each replica, least recently routed evicted first
once the replica's KV capacity is exceeded. A request's prefix is its leading
workload blocks (``Request.prefix_blocks``, ``block_size`` tokens each),
chained so that a block only matches after the same blocks before it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ..model import Request

__all__ = ["RoutedPrefixes"]


class RoutedPrefixes:
    """Per engine: an LRU set of chained prefix-block keys routed there."""

    __slots__ = ("block_size", "caches", "capacity", "_for", "_keys")

    def __init__(self, block_size: int | None) -> None:
        self.block_size = block_size  # tokens per prefix block (the workload's); None: no prefixes
        self.caches: list[OrderedDict[int, None]] = []
        self.capacity: list[int] = []  # prefix blocks each engine can hold
        self._for: Request | None = None
        self._keys: list[int] = []

    def add_engine(self, scheduler: Any) -> None:
        """The next engine's cache, as large as its KV pool in prefix blocks (its
        ``block_size`` or ``page_size`` tokens per page, else one token)."""
        self.caches.append(OrderedDict())
        if not self.block_size:
            self.capacity.append(0)
            return
        page = getattr(scheduler, "block_size", None) or getattr(scheduler, "page_size", None) or 1
        self.capacity.append(max(1, scheduler.kv_capacity_pages() * int(page) // self.block_size))

    def keys(self, request: Request) -> list[int]:
        """Chained keys of the request's prefix blocks (ints: hashes of int tuples are not salted)."""
        if request is not self._for:
            keys = []
            parent = 0
            for block in request.prefix_blocks or ():
                parent = hash((parent, block))
                keys.append(parent)
            self._for, self._keys = request, keys
        return self._keys

    def cached_tokens(self, engine: int, request: Request) -> int:
        if self.block_size is None or not request.prefix_blocks:
            return 0
        cache = self.caches[engine]
        n = 0
        for key in self.keys(request):
            if key not in cache:
                break
            n += 1
        return min(n * self.block_size, request.prompt_tokens)

    def routed(self, engine: int, request: Request) -> None:
        if self.block_size is None or not request.prefix_blocks:
            return
        cache = self.caches[engine]
        for key in self.keys(request):
            cache[key] = None
            cache.move_to_end(key)
        over = len(cache) - self.capacity[engine]
        for _ in range(over if over > 0 else 0):
            cache.popitem(last=False)
