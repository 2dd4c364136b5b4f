"""vLLM v1's KV block pool with its prefix cache, reduced to what decides scheduling.

vLLM keeps a doubly linked free queue of blocks. Blocks without a hash are
freed to its front (reused first), blocks with a hash to its back (kept as
long as possible, evicted least-recently-freed first); allocation pops from
the front and evicts the hash of a popped cached block; a prefix hit on a free
cached block takes it out of the queue ("touch"). So the queue is always
``[blocks without a hash] + [cached blocks, LRU order]``, and that is all this
class keeps: a count of anonymous free blocks and an ordered dict of free
cached blocks. Block ids are our own labels (vLLM's numbering never reaches a
scheduling decision); a block gets one when allocated and keeps it while it
holds a hash.

Without prefix caching every block is anonymous and the pool is one counter.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable


class BlockPool:
    """Free-block accounting, and the hash -> block map when caching is on."""

    __slots__ = ("usable", "caching", "anon_free", "lru", "cache", "ref", "key_of", "next_id")

    def __init__(self, num_gpu_blocks: int, caching: bool) -> None:
        # Block 0 is vLLM's null block: never allocated, never free.
        self.usable = num_gpu_blocks - 1
        self.caching = caching
        self.anon_free = self.usable
        self.lru: OrderedDict[int, Hashable] = OrderedDict()  # free cached blocks, evicted first at the front
        self.cache: dict[Hashable, int | list[int]] = {}  # hash -> block (or blocks, oldest first)
        self.ref: dict[int, int] = {}  # block -> requests holding it (caching mode)
        self.key_of: dict[int, Hashable] = {}  # cached block -> its hash
        self.next_id = 1

    @property
    def free(self) -> int:
        """vLLM's ``get_num_free_blocks()``: free blocks including evictable cached ones."""
        return self.anon_free + len(self.lru)

    @property
    def used(self) -> int:
        return self.usable - self.free

    # -- counts only (no prefix caching) ------------------------------------
    def take(self, n: int) -> None:
        self.anon_free -= n

    def give(self, n: int) -> None:
        self.anon_free += n

    # -- caching mode --------------------------------------------------------
    def allocate(self, n: int, into: list[int]) -> None:
        """Pop ``n`` blocks from the front of the free queue into ``into``."""
        ref = self.ref
        while n > 0:
            if self.anon_free > 0:
                take = min(n, self.anon_free)
                self.anon_free -= take
                n -= take
                start = self.next_id
                self.next_id = start + take
                for bid in range(start, start + take):
                    ref[bid] = 1
                    into.append(bid)
                continue
            popitem = self.lru.popitem
            key_of = self.key_of
            cache = self.cache
            while n > 0:
                bid, key = popitem(last=False)
                del key_of[bid]
                entry = cache[key]
                if type(entry) is int:
                    del cache[key]
                else:
                    entry.remove(bid)  # type: ignore[union-attr]
                    if not entry:
                        del cache[key]
                ref[bid] = 1
                into.append(bid)
                n -= 1

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
        for b in blocks:
            if ref[b] == 0:
                del self.lru[b]
            ref[b] += 1

    def insert(self, bid: int, key: Hashable) -> None:
        """Register a full, computed block under its hash (vLLM ``cache_full_blocks``)."""
        self.key_of[bid] = key
        entry = self.cache.get(key)
        if entry is None:
            self.cache[key] = bid
        elif type(entry) is int:
            self.cache[key] = [entry, bid]
        else:
            entry.append(bid)  # type: ignore[union-attr]

    def release(self, blocks: list[int]) -> None:
        """Free a request's blocks, tail first (vLLM frees in reverse order)."""
        ref = self.ref
        key_of = self.key_of
        lru = self.lru
        for b in reversed(blocks):
            count = ref[b] - 1
            if count:
                ref[b] = count
                continue
            key = key_of.get(b)
            if key is None:
                del ref[b]
                self.anon_free += 1
            else:
                ref[b] = 0
                lru[b] = key
