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
``ncached`` blocks), which is what release relies on. A block freed with the key ``None`` sits in
the cached part of the queue without a cache entry (a hash that can never be
looked up again: :meth:`release`), so it costs no dict work at either end.

Reference counts are implicit: a block held by one request has no entry
anywhere; ``shared`` counts holders of blocks held by two or more; ``qpos``
remembers the queue position a cached block was freed to, which tells whether
it is still free in O(1) (a hit needs that) without any bookkeeping when it is
evicted or allocated; it is built once hits are frequent (before that a scan
of the queue answers), so a workload without shared prefixes never keeps it. So allocation and
release touch one dict entry per block at most, and a hit never scans the queue. Allocation, registration and
release work on whole runs of blocks with C-level dict/list operations
(``dict.update(zip(...))``, slices, ``map``) and fall back to the per-block
loop only when one of the request's blocks is shared or a hash is already cached.

Without prefix caching every block is anonymous and the pool is one counter.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from itertools import compress, repeat
from operator import eq, not_, sub

_STALE = -1


def _consume(it: Iterable[object]) -> None:
    deque(it, 0)


class BlockPool:
    """Free-block accounting, and the hash -> block map when caching is on."""

    __slots__ = (
        "anon_free",
        "cache",
        "caching",
        "extra",
        "lbase",
        "lh",
        "lq",
        "lqk",
        "next_id",
        "nlists",
        "nlru",
        "nstale",
        "qpos",
        "scans_left",
        "shared",
        "usable",
    )

    def __init__(self, num_gpu_blocks: int, caching: bool) -> None:
        # Block 0 is vLLM's null block: never allocated, never free.
        self.usable = num_gpu_blocks - 1
        self.caching = caching
        self.anon_free = self.usable
        self.lq: list[int] = []  # free cached blocks, LRU first, from index lh; -1 = taken by a hit
        self.lqk: list[Hashable] = []  # their hashes (None at a tombstone)
        self.lbase = 0  # queue position of lq[0] (positions are absolute, lq is compacted)
        self.lh = 0
        self.nstale = 0  # tombstones in lq[lh:]
        self.nlru = 0  # free cached blocks
        self.cache: dict[Hashable, int | list[int]] = {}  # hash -> block (or blocks, oldest first)
        # block -> queue position it was last freed to; stale once it leaves the
        # queue (see _where), so allocation never has to touch it. None until
        # hits are frequent: a workload without shared prefixes never asks
        # whether a cached block is free, so it never pays for the positions.
        self.qpos: dict[int, int] | None = None
        self.scans_left = 4 * self.usable  # queue entries hit lookups may scan before qpos exists
        self.shared: dict[int, int] = {}  # block -> requests holding it, for blocks held by 2 or more
        self.next_id = 1
        self.nlists = 0  # cache entries holding several blocks (a list)
        self.extra = 0  # sum over shared blocks of (holders - 1): zero means no block is shared

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
    def _where(self, b: int) -> int:
        """Index in ``lq`` of cached block ``b`` if it sits in the free queue
        (held by nobody), else -1.

        ``qpos[b]`` is where it was last freed to; it is still there unless the
        head has passed that position (evicted, then in use or freed again
        elsewhere, which rewrites ``qpos``) or a hit left a tombstone there.
        Until hit lookups have scanned ``scans_left`` queue entries (a few times
        the pool's size), a C-level scan of the queue answers instead and no
        positions are kept: a workload whose only hits are a few resumed
        requests never pays for them, and one with many pays O(pool) at most.
        """
        qpos = self.qpos
        if qpos is None:
            if self.scans_left > 0:
                # charged by the length scanned: long queues (large pools) switch to positions
                # after a few scans' worth of work, not after thousands of scans
                self.scans_left -= len(self.lq) - self.lh
                try:
                    return self.lq.index(b, self.lh)
                except ValueError:
                    return -1
            qpos = self._index_positions()
        p = qpos.get(b)
        if p is None:
            return -1
        i = p - self.lbase
        return i if i >= self.lh and self.lq[i] == b else -1

    def _advance(self, lh: int) -> None:
        """Move the queue head to ``lh``, compacting the list once the consumed
        prefix dominates (positions stay absolute through ``lbase``)."""
        if lh > 4096 and lh * 2 > len(self.lq):
            del self.lq[:lh]
            del self.lqk[:lh]
            self.lbase += lh
            lh = 0
        self.lh = lh

    def allocate(self, n: int, into: list[int]) -> None:
        """Pop ``n`` blocks from the front of the free queue into ``into``."""
        if self.anon_free > 0:
            take = n if n < self.anon_free else self.anon_free
            self.anon_free -= take
            n -= take
            start = self.next_id
            self.next_id = start + take
            into.extend(range(start, start + take))
            if n <= 0:
                return
        # evict the n least recently freed cached blocks
        lq = self.lq
        lh = self.lh
        if n == 1 and lq[lh] != _STALE:  # the common decode case, without the run machinery
            bid = lq[lh]
            key = self.lqk[lh]
            if key is not None:
                cache = self.cache
                entry = cache[key]
                if type(entry) is int:
                    del cache[key]
                else:
                    entry.remove(bid)  # type: ignore[union-attr]  # type(entry) is int does not narrow the else branch to the list
                    if not entry:
                        del cache[key]
                        self.nlists -= 1
            self._advance(lh + 1)
            self.nlru -= 1
            into.append(bid)
            return
        lqk = self.lqk
        ev = lq[lh : lh + n]
        keys = lqk[lh : lh + n]
        lh += n
        if self.nstale:
            s = ev.count(_STALE)
            while s:
                self.nstale -= s
                keys = [k for b, k in zip(ev, keys) if b != _STALE]
                ev = [b for b in ev if b != _STALE]
                more = lq[lh : lh + s]
                keys.extend(lqk[lh : lh + s])
                lh += s
                ev.extend(more)
                s = more.count(_STALE)
        self._advance(lh)
        self.nlru -= n
        cache = self.cache
        if self.nlists:
            for bid, key in zip(ev, keys):
                if key is None:
                    continue
                entry = cache[key]
                if type(entry) is int:
                    del cache[key]
                else:
                    entry.remove(bid)  # type: ignore[union-attr]  # type(entry) is int does not narrow the else branch to the list
                    if not entry:
                        del cache[key]
                        self.nlists -= 1
        else:  # keyless blocks (None) have no entry
            _consume(map(cache.pop, keys, repeat(None)))
        into.extend(ev)

    def lookup(self, keys: list[Hashable], limit: int, key: Callable[[int], Hashable]) -> list[int]:
        """The leading cached run of blocks under ``keys[0], keys[1], ...`` then
        ``key(len(keys)), ...`` (at most ``limit``), as blocks: the first block
        cached under each hash."""
        cache = self.cache
        out: list[int] = []
        for entry in map(cache.get, keys[:limit]):
            if entry is None:
                return out
            out.append(entry if type(entry) is int else entry[0])  # type: ignore[index]  # type(entry) is int does not narrow the else branch to the list
        for i in range(len(keys), limit):
            entry = cache.get(key(i))
            if entry is None:
                break
            out.append(entry if type(entry) is int else entry[0])  # type: ignore[index]  # type(entry) is int does not narrow the else branch to the list
        return out

    def evictable(self, blocks: list[int]) -> int:
        """How many of ``blocks`` sit in the free queue (a hit on them uses free capacity)."""
        where = self._where
        return sum(1 for b in blocks if where(b) >= 0)

    def touch(self, blocks: list[int]) -> None:
        """A hit takes ``blocks``: free ones leave the queue (a tombstone marks
        the spot), held ones gain a holder."""
        where = self._where
        shared = self.shared
        lq = self.lq
        lqk = self.lqk
        for b in blocks:
            i = where(b)
            if i >= 0:
                lq[i] = _STALE
                lqk[i] = None
                self.nstale += 1
                self.nlru -= 1
            else:
                shared[b] = shared.get(b, 1) + 1
                self.extra += 1

    def insert(self, bid: int, key: Hashable) -> None:
        """Register a full, computed block under its hash (vLLM ``cache_full_blocks``)."""
        entry = self.cache.get(key)
        if entry is None:
            self.cache[key] = bid
        elif type(entry) is int:
            self.cache[key] = [entry, bid]
            self.nlists += 1
        else:
            entry.append(bid)  # type: ignore[union-attr]  # type(entry) is int does not narrow the else branch to the list

    def insert_run(self, blocks: list[int], keys: list[Hashable]) -> None:
        """``insert`` for each (block, key) pair in order.

        The common case (no key cached yet, none repeated) is one C-level update;
        a repeat inside the run (only a hash collision makes one) shows as the
        cache growing by less than the run, and the run is redone block by block.
        """
        cache = self.cache
        if cache.keys().isdisjoint(keys):
            before = len(cache)
            cache.update(zip(keys, blocks))
            if len(cache) - before == len(keys):
                return
            _consume(map(cache.__delitem__, set(keys)))
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
        A key of ``None`` is a block vLLM would cache under a hash nobody can
        ever look up again (a finished request's own blocks): it joins the
        cached part of the queue, where vLLM puts it, without a cache entry.
        """
        if not self.extra or self.shared.keys().isdisjoint(blocks):
            # nobody else holds any of them: the unhashed tail goes to the
            # front (a count), the hashed ones to the back, last block first
            self.anon_free += len(blocks) - ncached
            if ncached:
                self._enqueue(blocks[ncached - 1 :: -1], keys[::-1])
            return
        shared = self.shared
        held = shared.__contains__
        sh = list(filter(held, blocks))
        if len(set(sh)) != len(sh):
            # a block listed twice (a hash collision inside the request's own
            # chain): one holder per listing, in order
            self._release_each(blocks, ncached, keys)
            return
        # some are held elsewhere too: those lose a holder, the others are freed
        # exactly as above (the order of the queue is the reverse block order)
        tail = blocks[ncached:]
        self.anon_free += len(tail) - sum(map(held, tail))
        if ncached:
            head = blocks[ncached - 1 :: -1]
            keep = list(map(not_, map(held, head)))
            self._enqueue(list(compress(head, keep)), list(compress(keys[::-1], keep)))
        holders = list(map(sub, map(shared.__getitem__, sh), repeat(1)))
        shared.update(zip(sh, holders))
        _consume(map(shared.__delitem__, compress(sh, map(eq, holders, repeat(1)))))
        self.extra -= len(sh)

    def _enqueue(self, freed: list[int], keys: list[Hashable]) -> None:
        """Append freed cached blocks to the back of the free queue (in the
        order given), with their keys, and their positions when those are kept."""
        lq = self.lq
        start = self.lbase + len(lq)
        lq.extend(freed)
        self.lqk.extend(keys)
        self.nlru += len(freed)
        qpos = self.qpos
        if qpos is not None:
            qpos.update(zip(freed, range(start, start + len(freed))))
            if len(qpos) > 2 * self.usable + 4096:
                self._index_positions()

    def _release_each(self, blocks: list[int], ncached: int, keys: list[Hashable]) -> None:
        """:meth:`release` one block at a time, tail first."""
        shared = self.shared
        lq = self.lq
        for j in range(len(blocks) - 1, -1, -1):
            b = blocks[j]
            count = shared.get(b)
            if count is not None:
                if count == 2:
                    del shared[b]
                else:
                    shared[b] = count - 1
                self.extra -= 1
                continue
            if j < ncached:
                if self.qpos is not None:
                    self.qpos[b] = self.lbase + len(lq)
                lq.append(b)
                self.lqk.append(keys[j])
                self.nlru += 1
            else:
                self.anon_free += 1

    def _index_positions(self) -> dict[int, int]:
        """(Re)build ``qpos`` from the queue: once hits are frequent, and when
        positions of blocks that left the queue for good (ids freed without a
        hash are never reused) pile up, so it stays proportional to the pool."""
        lq = self.lq
        base = self.lbase
        self.qpos = {b: base + i for i in range(self.lh, len(lq)) if (b := lq[i]) != _STALE}
        return self.qpos
