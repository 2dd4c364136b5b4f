"""What each replica holds in its prefix cache, as a router asks it.

From a replica's KV events when its scheduler records them (:class:`EventPrefixes`).
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

from ..interfaces.model import Request

__all__ = ["EventPrefixes", "RoutedPrefixes"]


class RoutedPrefixes:
    """Per engine: an LRU set of chained prefix-block keys routed there."""

    __slots__ = ("_for", "_keys", "block_size", "caches", "capacity")

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


class EventPrefixes:
    """Per engine: the block hashes its KV events say are resident, as Dynamo's
    indexer and llm-d's precise prefix-cache scorer rebuild them from vLLM's
    events (``BlockStored`` adds, ``BlockRemoved`` drops, ``AllBlocksCleared``
    empties), applied at the end of the step that produced them. A request's
    prefix there is the run of its ``prompt_block_hashes`` (the scheduler's own,
    first block first) found resident, times the scheduler's block size: the
    longest-consecutive-prefix rule of llm-d's ``LongestPrefixScorer``."""

    __slots__ = ("_for", "_hashes", "block_size", "resident")

    def __init__(self) -> None:
        self.resident: list[set[int] | None] = []  # None: the engine records no events
        self.block_size: list[int] = []
        self._for: tuple[Request, type[Any], int] | None = None
        self._hashes: list[int] = []

    def add_engine(self, scheduler: Any, records: bool) -> None:
        self.resident.append(set() if records else None)
        self.block_size.append(int(getattr(scheduler, "block_size", 0) or 0))

    def known(self, engine: int) -> bool:
        return self.resident[engine] is not None

    def apply(self, engine: int, events: list[Any]) -> None:
        from ..interfaces.kv_events import AllBlocksCleared, BlockRemoved, BlockStored

        resident = self.resident[engine]
        assert resident is not None
        for event in events:
            kind = type(event)
            if kind is BlockStored:
                resident.update(event.block_hashes)
                self.block_size[engine] = event.block_size
            elif kind is BlockRemoved:
                resident.difference_update(event.block_hashes)
            elif kind is AllBlocksCleared:
                resident.clear()

    def cached_tokens(self, engine: int, scheduler: Any, request: Request) -> int:
        resident = self.resident[engine]
        if not resident:
            return 0
        key = (request, type(scheduler), self.block_size[engine])
        if key != self._for:  # the same hashes for every replica of one scheduler kind and block size
            self._for, self._hashes = key, scheduler.prompt_block_hashes(request)
        n = 0
        for h in self._hashes:
            if h not in resident:
                break
            n += 1
        return min(n * self.block_size[engine], request.prompt_tokens)
