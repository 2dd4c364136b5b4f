"""vLLM v1's KV block pool with its prefix cache, reduced to what decides scheduling.

vLLM keeps a doubly linked free queue of blocks. Blocks without a hash are
freed to its front (reused first), blocks with a hash to its back (kept as
long as possible, evicted least-recently-freed first); allocation pops from
the front and evicts the hash of a popped cached block; a prefix hit on a free
cached block takes it out of the queue ("touch"). So the queue is always
``[blocks without a hash] + [cached blocks, LRU order]``, and that is all this
class keeps: a count of anonymous free blocks and the queue of free cached
blocks. Block ids are our own labels (vLLM's numbering never reaches a
scheduling decision); a block gets one when allocated and keeps it while it
holds a hash.

Speed: the cached part of the free queue is a plain list with a head index
(``lq[lh:]``) and a parallel list of the blocks' hashes (``lqk``), so an
eviction finds the hash to drop without a per-block map; a block taken out of
the middle by a hit is overwritten with a ``-1`` tombstone (``nstale`` counts
them). A block's hash is otherwise known from its position: block ``j`` of a
request holds the request's ``j``-th key once registered (its first
``ncached`` blocks), which is what release relies on. Allocation, registration and
release work on whole runs of blocks with C-level dict/list operations
(``dict.update(zip(...))``, slices, ``map``) and fall back to the per-block
loop only when a block is shared (refcount > 1) or a hash is already cached.

Without prefix caching every block is anonymous and the pool is one counter.
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Callable, Hashable

_STALE = -1


def _consume(it: object) -> None:
    deque(it, 0)  # type: ignore[call-overload]


class BlockPool:
    """Free-block accounting, and the hash -> block map when caching is on."""

    __slots__ = ("usable", "caching", "anon_free", "lq", "lqk", "lh", "nstale", "nlru", "cache", "ref",
                 "next_id", "nlists", "extra")

    def __init__(self, num_gpu_blocks: int, caching: bool) -> None:
        # Block 0 is vLLM's null block: never allocated, never free.
        self.usable = num_gpu_blocks - 1
        self.caching = caching
        self.anon_free = self.usable
        self.lq: list[int] = []  # free cached blocks, LRU first, from index lh; -1 = taken by a hit
        self.lqk: list[Hashable] = []  # their hashes (None at a tombstone)
        self.lh = 0
        self.nstale = 0  # tombstones in lq[lh:]
        self.nlru = 0  # free cached blocks
        self.cache: dict[Hashable, int | list[int]] = {}  # hash -> block (or blocks, oldest first)
        self.ref: dict[int, int] = {}  # block -> requests holding it (0: free cached)
        self.next_id = 1
        self.nlists = 0  # cache entries holding several blocks (a list)
        self.extra = 0  # sum over blocks of (refcount - 1) when > 1: zero means no block is shared

    @property
    def free(self) -> int:
        """vLLM's ``get_num_free_blocks()``: free blocks including evictable cached ones."""
        return self.anon_free + self.nlru

    @property
    def used(self) -> int:
        return self.usable - self.anon_free - self.nlru

    # -- counts only (no prefix caching) ------------------------------------
    def take(self, n: int) -> None:
        self.anon_free -= n

    def give(self, n: int) -> None:
        self.anon_free += n

    # -- caching mode --------------------------------------------------------
    def allocate(self, n: int, into: list[int]) -> None:
        """Pop ``n`` blocks from the front of the free queue into ``into``."""
        ref = self.ref
        if self.anon_free > 0:
            take = n if n < self.anon_free else self.anon_free
            self.anon_free -= take
            n -= take
            start = self.next_id
            self.next_id = start + take
            fresh = range(start, start + take)
            ref.update(zip(fresh, repeat(1)))
            into.extend(fresh)
            if n <= 0:
                return
        # evict the n least recently freed cached blocks
        lq = self.lq
        lh = self.lh
        if n == 1 and lq[lh] != _STALE:  # the common decode case, without the run machinery
            bid = lq[lh]
            key = self.lqk[lh]
            cache = self.cache
            entry = cache[key]
            if type(entry) is int:
                del cache[key]
            else:
                entry.remove(bid)  # type: ignore[union-attr]
                if not entry:
                    del cache[key]
                    self.nlists -= 1
            lh += 1
            if lh > 4096 and lh * 2 > len(lq):
                del lq[:lh]
                del self.lqk[:lh]
                lh = 0
            self.lh = lh
            self.nlru -= 1
            ref[bid] = 1
            into.append(bid)
            return
        lqk = self.lqk
        ev = lq[lh:lh + n]
        keys = lqk[lh:lh + n]
        lh += n
        if self.nstale:
            s = ev.count(_STALE)
            while s:
                self.nstale -= s
                keys = [k for b, k in zip(ev, keys) if b != _STALE]
                ev = [b for b in ev if b != _STALE]
                more = lq[lh:lh + s]
                keys.extend(lqk[lh:lh + s])
                lh += s
                ev.extend(more)
                s = more.count(_STALE)
        if lh > 4096 and lh * 2 > len(lq):
            del lq[:lh]
            del lqk[:lh]
            lh = 0
        self.lh = lh
        self.nlru -= n
        cache = self.cache
        if self.nlists:
            for bid, key in zip(ev, keys):
                entry = cache[key]
                if type(entry) is int:
                    del cache[key]
                else:
                    entry.remove(bid)  # type: ignore[union-attr]
                    if not entry:
                        del cache[key]
                        self.nlists -= 1
        else:
            _consume(map(cache.__delitem__, keys))
        ref.update(zip(ev, repeat(1)))
        into.extend(ev)

    def lookup(self, key: Callable[[int], Hashable], limit: int) -> list[int]:
        """The leading cached run of blocks ``key(0), key(1), ...`` (at most
        ``limit``), as blocks: the first block cached under each hash."""
        cache = self.cache
        out: list[int] = []
        for i in range(limit):
            entry = cache.get(key(i))
            if entry is None:
                break
            out.append(entry if type(entry) is int else entry[0])  # type: ignore[arg-type]
        return out

    def evictable(self, blocks: list[int]) -> int:
        """How many of ``blocks`` sit in the free queue (a hit on them uses free capacity)."""
        ref = self.ref
        return sum(1 for b in blocks if ref[b] == 0)

    def touch(self, blocks: list[int]) -> None:
        ref = self.ref
        lq = self.lq
        for b in blocks:
            if ref[b] == 0:
                i = lq.index(b, self.lh)
                lq[i] = _STALE
                self.lqk[i] = None
                self.nstale += 1
                self.nlru -= 1
            else:
                self.extra += 1
            ref[b] += 1

    def insert(self, bid: int, key: Hashable) -> None:
        """Register a full, computed block under its hash (vLLM ``cache_full_blocks``)."""
        entry = self.cache.get(key)
        if entry is None:
            self.cache[key] = bid
        elif type(entry) is int:
            self.cache[key] = [entry, bid]
            self.nlists += 1
        else:
            entry.append(bid)  # type: ignore[union-attr]

    def insert_run(self, blocks: list[int], keys: list[Hashable], distinct: bool) -> None:
        """``insert`` for each (block, key) pair in order; ``distinct``: no key repeats in ``keys``."""
        cache = self.cache
        if distinct and cache.keys().isdisjoint(keys):
            cache.update(zip(keys, blocks))
        else:
            insert = self.insert
            for b, k in zip(blocks, keys):
                insert(b, k)

    def store(self, blocks: list[int], keys: list[Hashable]) -> None:
        """Register blocks under keys no other block can hold (plain stores: a stale
        entry of the same request's earlier run is overwritten)."""
        self.cache.update(zip(keys, blocks))

    def release(self, blocks: list[int], ncached: int, keys: list[Hashable]) -> None:
        """Free a request's blocks, tail first (vLLM frees in reverse order).

        ``blocks[:ncached]`` hold a hash, ``keys`` (the caller's invariant), the rest none.
        """
        ref = self.ref
        if not self.extra:
            # nobody else holds any of them: the unhashed tail goes to the
            # front (a count), the hashed ones to the back, last block first
            tail = blocks[ncached:]
            if tail:
                self.anon_free += len(tail)
                _consume(map(ref.__delitem__, tail))
            if ncached:
                head = blocks[ncached - 1::-1]
                self.lq.extend(head)
                self.lqk.extend(keys[::-1])
                self.nlru += ncached
                ref.update(zip(head, repeat(0)))
            return
        lq = self.lq
        lqk = self.lqk
        for j in range(len(blocks) - 1, -1, -1):
            b = blocks[j]
            count = ref[b] - 1
            if count:
                ref[b] = count
                self.extra -= 1
                continue
            if j < ncached:
                ref[b] = 0
                lq.append(b)
                lqk.append(keys[j])
                self.nlru += 1
            else:
                del ref[b]
                self.anon_free += 1
