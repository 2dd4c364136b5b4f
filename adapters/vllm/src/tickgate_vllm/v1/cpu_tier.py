"""The CPU tier of vLLM 0.33's native KV offloading: ``CPUOffloadingManager``
with its default ``LRUCachePolicy`` (``vllm/v1/kv_offload/cpu/manager.py``,
``vllm/v1/kv_offload/cpu/policies/lru.py``), reduced to what decides scheduling.

A chunk (``blocks_per_chunk`` GPU blocks) is cached under the hash of its last
block. Its reference count is -1 while its store is in flight (a lookup then
answers "pending"), 0 when it may be evicted, > 0 while loads read it. The
"LRU" is vLLM's request-scoped one: each chunk has a rank ``(r, s)``; a request
touching chunks gives them ``(its rank, -position)`` (tails evicted before
heads), and when it finishes every chunk it saw gets a fresh rank, tail first,
so its head is the most recently used. Eviction takes the evictable chunks of
lowest rank, never one of the chunks being stored. Chunk ids are allocated as
vLLM does (fresh ones first, then the last freed), so they are comparable with
the harness's ``cpu_chunks``.

``store_threshold >= 2`` stores a chunk only once it has been offered that many
times (``counts``, an ordered tracker of at most ``max_tracker_size`` keys).

Speed: one dict entry per cached chunk; eviction merges two lazy queues of
``(rank, seq, key)`` (``seq`` orders equal ranks without comparing keys: ranks
are unique, so it never decides anything): a heap, and a FIFO for the fresh
ranks a finish gives (each larger than every rank before it, so appending keeps
the FIFO sorted and costs no heap operation).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable

MISS, PENDING, HIT = 0, 1, 2


class TierRequest:
    """What the tier keeps per request (vLLM's ``_RequestRank`` and
    ``_RequestCacheAccess`` in the request's ``ReqContext``)."""

    __slots__ = ("finished", "order", "positions", "rank", "seen")

    def __init__(self, positions: dict[Hashable, int]) -> None:
        self.rank: int | None = None
        #: chunk key -> token position of its end (``set_offload_key_position``)
        self.positions = positions
        self.seen: set[Hashable] = set()
        self.order: list[Hashable] = []  # the keys seen, first seen first
        self.finished = False


class CpuTier:
    """``CPUOffloadingManager`` + ``LRUCachePolicy`` for one engine."""

    def __init__(self, num_chunks: int, store_threshold: int = 0, max_tracker_size: int = 64_000) -> None:
        self.num_chunks = num_chunks
        self.allocated = 0
        self.free_list: list[int] = []
        self.chunks: dict[Hashable, list[int]] = {}  # key -> [ref_cnt, chunk_id]
        self.ranks: dict[Hashable, tuple[int, int]] = {}
        self.evictable: set[Hashable] = set()
        self.num_evictable = 0
        self.heap: list[tuple[tuple[int, int], int, Hashable]] = []
        self.fifo: deque[tuple[tuple[int, int], int, Hashable]] = deque()  # fresh ranks, increasing
        self.seq = 0
        self.next_rank = 0
        self.store_threshold = store_threshold
        self.max_tracker_size = max_tracker_size
        self.counts: OrderedDict[Hashable, int] | None = OrderedDict() if store_threshold >= 2 else None
        # totals
        self.evictions = 0
        self.skipped_stores = 0  # offers below store_threshold

    # -- the LRU policy ---------------------------------------------------------
    def _rank_of(self, ctx: TierRequest) -> int:
        if ctx.rank is None:
            self.next_rank += 1
            ctx.rank = self.next_rank
        return ctx.rank

    def _push(self, key: Hashable) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (self.ranks[key], self.seq, key))

    def _compact(self) -> None:
        """Drop the stale entries of a queue once they dominate it (after each operation
        that adds some; the order of a rebuilt heap decides nothing: ranks are unique)."""
        limit = max(64, 4 * len(self.evictable))
        if len(self.heap) <= limit and len(self.fifo) <= limit:
            return
        ranks = self.ranks
        evictable = self.evictable
        if len(self.heap) > limit:
            self.heap = [e for e in self.heap if e[2] in evictable and ranks.get(e[2]) == e[0]]
            heapq.heapify(self.heap)
        if len(self.fifo) > limit:
            self.fifo = deque(e for e in self.fifo if e[2] in evictable and ranks.get(e[2]) == e[0])

    def _mark_evictable(self, key: Hashable) -> None:
        self.evictable.add(key)
        self._push(key)  # the caller compacts

    def _fresh_rank(self, keys: Iterable[Hashable]) -> None:
        """``_update_recency``: a new rank for each key, in the order given."""
        chunks = self.chunks
        ranks = self.ranks
        evictable = self.evictable
        fifo = self.fifo
        for key in keys:
            if key in chunks:
                self.next_rank += 1
                rank = ranks[key] = (self.next_rank, 0)
                if key in evictable:
                    self.seq += 1
                    fifo.append((rank, self.seq, key))  # the largest rank yet: the FIFO stays sorted
        self._compact()

    def _access(self, keys: list[Hashable], ctx: TierRequest) -> None:
        """``on_request_access`` for the keys ``ctx`` sees for the first time."""
        new = [k for k in keys if k not in ctx.seen]
        if not new:
            return
        ctx.seen.update(new)
        ctx.order.extend(new)
        rank = self._rank_of(ctx)
        chunks = self.chunks
        for key in new:
            pos = ctx.positions.get(key)
            if pos is None or key not in chunks:
                continue
            r = (rank, -pos)
            if self.ranks[key] >= r:
                continue
            self.ranks[key] = r
            if key in self.evictable:
                self._push(key)
        self._compact()

    def _evict(self, n: int, protected: set[Hashable]) -> list[int] | None:
        """The ``n`` evictable, unprotected chunks of lowest rank, removed; their ids."""
        heap = self.heap
        fifo = self.fifo
        ranks = self.ranks
        evictable = self.evictable
        chosen: list[tuple[tuple[tuple[int, int], int, Hashable], bool]] = []  # (entry, from the FIFO)
        picked: set[Hashable] = set()
        deferred = []
        while len(chosen) < n:
            while heap and (heap[0][2] not in evictable or ranks.get(heap[0][2]) != heap[0][0]):
                heapq.heappop(heap)
            while fifo and (fifo[0][2] not in evictable or ranks.get(fifo[0][2]) != fifo[0][0]):
                fifo.popleft()
            if fifo and (not heap or fifo[0][0] < heap[0][0]):
                entry, from_fifo = fifo.popleft(), True
            elif heap:
                entry, from_fifo = heapq.heappop(heap), False
            else:
                break
            key = entry[2]
            if key in picked:  # a key re-pinned without a new rank can sit in a queue twice
                continue
            if key in protected:
                deferred.append((entry, from_fifo))
                continue
            chosen.append((entry, from_fifo))
            picked.add(key)
        back = deferred if len(chosen) == n else deferred + chosen
        for entry, from_fifo in back:
            if not from_fifo:
                heapq.heappush(heap, entry)
        fifo.extendleft(sorted((e for e, from_fifo in back if from_fifo), reverse=True))
        if len(chosen) < n:
            return None
        ids = []
        for (_, _, key), _ in chosen:
            self.evictable.remove(key)
            ids.append(self.chunks.pop(key)[1])
            del ranks[key]
        return ids

    # -- the manager ------------------------------------------------------------
    def lookup(self, key: Hashable) -> int:
        chunk = self.chunks.get(key)
        if chunk is None:
            return MISS
        return PENDING if chunk[0] < 0 else HIT

    def prepare_load(self, keys: list[Hashable], ctx: TierRequest) -> list[int]:
        """Pin ``keys`` for a load; their chunk ids."""
        ids = []
        for key in keys:
            chunk = self.chunks[key]
            if chunk[0] == 0:
                self.evictable.remove(key)
                self.num_evictable -= 1
            chunk[0] += 1
            ids.append(chunk[1])
        self._access(keys, ctx)
        return ids

    def complete_load(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            chunk = self.chunks[key]
            chunk[0] -= 1
            if chunk[0] == 0:
                self.num_evictable += 1
                self._mark_evictable(key)
        self._compact()

    def _count_offers(self, keys: list[Hashable]) -> None:
        """``_record_accesses``: count the offer without evicting tracked keys it offers."""
        counts = self.counts
        assert counts is not None
        protected = set()
        for key in keys:
            if key in counts:
                counts.move_to_end(key)
                counts[key] += 1
                protected.add(key)
        unprotected = len(counts) - len(protected)
        for key in keys:
            if key in counts:
                continue
            if len(counts) >= self.max_tracker_size:
                if unprotected == 0:
                    continue
                counts.popitem(last=False)
                unprotected -= 1
            counts[key] = 1

    def prepare_store(
        self, keys: list[Hashable], ctx: TierRequest
    ) -> tuple[list[Hashable], list[int]] | None:
        """Allocate chunks for the keys not cached yet (evicting if needed): the keys to
        store and their chunk ids, or None when the tier cannot make room now."""
        if self.counts is not None:
            self._count_offers(keys)
        chunks = self.chunks
        to_store = [k for k in keys if k not in chunks]
        ready = [k for k in keys if k in chunks and chunks[k][0] >= 0]
        if self.counts is not None:
            before = len(to_store)
            counts = self.counts
            to_store = [k for k in to_store if counts.get(k, 0) >= self.store_threshold]
            self.skipped_stores += before - len(to_store)
        recorded = set(to_store)
        recorded.update(ready)
        self._access([k for k in keys if k in recorded], ctx)
        if not to_store:
            return [], []
        evict = len(to_store) - (len(self.free_list) + self.num_chunks - self.allocated)
        if evict > 0:
            if evict > self.num_evictable:
                return None
            freed = self._evict(evict, set(keys))
            if freed is None:
                return None
            self.num_evictable -= len(freed)
            self.evictions += len(freed)
            self.free_list.extend(freed)
        ids = []
        for key in to_store:
            if self.allocated < self.num_chunks:
                cid = self.allocated
                self.allocated += 1
            else:
                cid = self.free_list.pop()
            ids.append(cid)
            chunks[key] = [-1, cid]
            pos = ctx.positions.get(key)
            if pos is None:
                self.next_rank += 1
                self.ranks[key] = (self.next_rank, 0)
            else:
                self.ranks[key] = (self._rank_of(ctx), -pos)
        return to_store, ids

    def complete_store(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            chunk = self.chunks.get(key)
            if chunk is not None and chunk[0] < 0:
                chunk[0] = 0
                self.num_evictable += 1
                self._mark_evictable(key)
        self._compact()

    def request_finished(self, ctx: TierRequest) -> None:
        """``on_request_finished``: the request's keys, head to tail, get fresh ranks tail first."""
        if ctx.finished:
            return
        ctx.finished = True
        keys = ctx.order
        pos = ctx.positions
        if all(k in pos for k in keys):
            keys = sorted(keys, key=pos.__getitem__)
        self._fresh_rank(reversed(keys))

    def used_chunks(self) -> int:
        """Chunks holding KV (cached or being written)."""
        return self.allocated - len(self.free_list)
