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

Speed: one dict entry per cached chunk; the evictable chunks wait in runs (the
chunks one store, load or finish makes evictable, sorted by rank), so queueing
costs per run, not per chunk: a heap of runs keyed by a lower bound of each
run's next rank, and a FIFO of the runs of fresh ranks a finish gives (each
above every rank before it, so appending keeps the FIFO sorted). Eviction reads
a run on while its ranks stay below the other runs' (no heap operation per
chunk); an entry whose chunk got another rank or was pinned is stale and
skipped. Ranks are unique, so the order the runs are kept in decides nothing.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
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


class _Run:
    """Queued keys in increasing rank order, read from ``i`` on: the ranks each had when
    queued (an entry whose key has another rank now, or is not evictable, is stale)."""

    __slots__ = ("i", "keys", "ranks")

    def __init__(self, ranks: list[tuple[int, int]], keys: list[Hashable]) -> None:
        self.ranks = ranks
        self.keys = keys
        self.i = 0


def _first(entry: tuple[tuple[int, int], Hashable]) -> tuple[int, int]:
    return entry[0]


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
        self.heap: list[tuple[tuple[int, int], int, _Run]] = []  # keyed by a lower bound of the run
        self.fifo: deque[_Run] = deque()  # runs of fresh ranks, each above the ones before
        self.queued = 0  # entries pushed to the queues since they were last rebuilt
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

    def _push_run(self, keys: list[Hashable]) -> None:
        """Queue ``keys`` (evictable, ranked) as one run on the heap, sorted by rank."""
        ranks = self.ranks
        if len(keys) > 1:
            keys = sorted(keys, key=ranks.__getitem__)
        rs = [ranks[k] for k in keys]
        self.seq += 1
        heapq.heappush(self.heap, (rs[0], self.seq, _Run(rs, keys)))
        self.queued += len(keys)  # the caller compacts

    def _compact(self) -> None:
        """Drop the stale entries of the queues once they dominate them (after each operation
        that adds some; the runs a rebuild makes decide nothing: ranks are unique)."""
        limit = max(64, 4 * len(self.evictable))
        if self.queued <= limit:
            return
        live = [(r, k) for _, _, run in self.heap for r, k in self._valid(run)]
        live.sort(key=_first)
        tail = [(r, k) for run in self.fifo for r, k in self._valid(run)]  # sorted already
        self.heap = []
        self.fifo = deque()
        self.queued = len(live) + len(tail)
        if live:
            self.seq += 1
            self.heap.append((live[0][0], self.seq, _Run([r for r, _ in live], [k for _, k in live])))
        if tail:
            self.fifo.append(_Run([r for r, _ in tail], [k for _, k in tail]))

    def _valid(self, run: _Run) -> list[tuple[tuple[int, int], Hashable]]:
        """The entries of ``run`` not consumed yet that still hold their key's rank."""
        ranks = self.ranks
        evictable = self.evictable
        return [
            (r, k)
            for r, k in zip(run.ranks[run.i :], run.keys[run.i :])
            if k in evictable and ranks.get(k) == r
        ]

    def _fresh_rank(self, keys: Iterable[Hashable]) -> None:
        """``_update_recency``: a new rank for each key, in the order given."""
        chunks = self.chunks
        cached = [k for k in keys if k in chunks]
        first = self.next_rank + 1
        self.next_rank += len(cached)
        fresh = [(r, 0) for r in range(first, self.next_rank + 1)]
        self.ranks.update(zip(cached, fresh))
        evictable = self.evictable
        rs = [r for r, k in zip(fresh, cached) if k in evictable]
        if rs:  # the largest ranks yet: the FIFO of runs stays sorted
            self.fifo.append(_Run(rs, [k for k in cached if k in evictable]))
            self.queued += len(rs)
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
        ranks = self.ranks
        evictable = self.evictable
        raised = []
        for key in new:
            pos = ctx.positions.get(key)
            if pos is None or key not in chunks:
                continue
            r = (rank, -pos)
            if ranks[key] >= r:
                continue
            ranks[key] = r
            if key in evictable:
                raised.append(key)
        if raised:
            self._push_run(raised)
        self._compact()

    def _evict(self, n: int, protected: set[Hashable]) -> list[int] | None:
        """The ``n`` evictable, unprotected chunks of lowest rank, removed; their ids (lowest
        rank first). The queues merge by run: a run is read on while its entries stay below
        the next run's (a heap entry's rank is a lower bound of its run's next entry)."""
        heap = self.heap
        fifo = self.fifo
        ranks = self.ranks
        evictable = self.evictable
        chosen: list[tuple[tuple[int, int], Hashable]] = []
        picked: set[Hashable] = set()
        deferred: list[tuple[tuple[int, int], Hashable]] = []
        while len(chosen) < n:
            while heap:  # the heap's top run, at its next live entry and keyed by it
                top = heap[0][2]
                rs, ks, i = top.ranks, top.keys, top.i
                end = len(ks)
                while i < end and (ks[i] not in evictable or ranks.get(ks[i]) != rs[i]):
                    i += 1
                top.i = i
                if i == end:
                    heapq.heappop(heap)
                elif rs[i] != heap[0][0]:
                    self.seq += 1
                    heapq.heapreplace(heap, (rs[i], self.seq, top))
                else:
                    break
            while fifo:
                front = fifo[0]
                rs, ks, i = front.ranks, front.keys, front.i
                end = len(ks)
                while i < end and (ks[i] not in evictable or ranks.get(ks[i]) != rs[i]):
                    i += 1
                front.i = i
                if i < end:
                    break
                fifo.popleft()
            if fifo and (not heap or fifo[0].ranks[fifo[0].i] < heap[0][0]):
                src = fifo[0]
                bound = heap[0][0] if heap else None
            elif heap:
                src = heap[0][2]
                bound = fifo[0].ranks[fifo[0].i] if fifo else None
                for j in (1, 2):
                    if len(heap) > j and (bound is None or heap[j][0] < bound):
                        bound = heap[j][0]
            else:
                break
            rs, ks, i = src.ranks, src.keys, src.i
            stop = len(ks) if bound is None else bisect_right(rs, bound, i)  # the entries below the rest
            while i < stop:
                r = rs[i]
                key = ks[i]
                i += 1
                if key not in evictable or ranks.get(key) != r:
                    continue
                if key in picked:  # a key re-pinned without a new rank can sit in a queue twice
                    continue
                if key in protected:
                    deferred.append((r, key))
                    continue
                chosen.append((r, key))
                picked.add(key)
                if len(chosen) == n:
                    break
            src.i = i
        back = deferred if len(chosen) == n else deferred + chosen
        if back:
            back.sort(key=_first)
            self.seq += 1
            heapq.heappush(heap, (back[0][0], self.seq, _Run([r for r, _ in back], [k for _, k in back])))
            self.queued += len(back)
        if len(chosen) < n:
            return None
        keys = [key for _, key in chosen]
        evictable.difference_update(keys)
        chunks = self.chunks
        ids = [chunks.pop(key)[1] for key in keys]
        for key in keys:
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
        chunks = self.chunks
        freed = []
        for key in keys:
            chunk = chunks[key]
            chunk[0] -= 1
            if chunk[0] == 0:
                freed.append(key)
        self._mark_evictable(freed)

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
        # ids: never used ones first, then the last freed (the free list's end)
        fresh = min(len(to_store), self.num_chunks - self.allocated)
        ids = list(range(self.allocated, self.allocated + fresh))
        self.allocated += fresh
        reused = len(to_store) - fresh
        if reused:
            free = self.free_list
            ids.extend(reversed(free[-reused:]))
            del free[-reused:]
        chunks.update(zip(to_store, [[-1, cid] for cid in ids]))
        ranks = self.ranks
        positions = [ctx.positions.get(key) for key in to_store]
        if None not in positions:  # the request's own chunks: (its rank, -position)
            rank = self._rank_of(ctx)
            ranks.update(zip(to_store, [(rank, -pos) for pos in positions]))  # type: ignore[operator]  # no None
            return to_store, ids
        for key, pos in zip(to_store, positions):
            if pos is None:
                self.next_rank += 1
                ranks[key] = (self.next_rank, 0)
            else:
                ranks[key] = (self._rank_of(ctx), -pos)
        return to_store, ids

    def complete_store(self, keys: Iterable[Hashable]) -> None:
        chunks = self.chunks
        written = []
        for key in keys:
            chunk = chunks.get(key)
            if chunk is not None and chunk[0] < 0:
                chunk[0] = 0
                written.append(key)
        self._mark_evictable(written)

    def _mark_evictable(self, keys: list[Hashable]) -> None:
        if keys:
            self.num_evictable += len(keys)
            self.evictable.update(keys)
            self._push_run(keys)
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
