"""KV blocks of one request: allocation on demand, prefix-cache registration,
release and preemption by recompute.

Mirrors ``vllm/v1/core/kv_cache_manager.py`` (``KVCacheManager.allocate_slots()``'s
allocation, ``cache_blocks()``, ``free()``, with
``single_type_kv_cache_manager.py``'s ``cache_blocks`` / ``free`` below them) and
``Scheduler._preempt_request()`` in ``vllm/v1/core/sched/scheduler.py``. The
pool itself (free queue, prefix cache, evictions) is :mod:`.pool`.
"""

from __future__ import annotations

import heapq
from itertools import repeat
from typing import TYPE_CHECKING

from .request import PREEMPTED, RequestState
from .state import SchedulerState

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Hashable


class BlockOps(SchedulerState):
    """Block helpers of :class:`~.scheduler.VllmV1Scheduler` (a mixin: state is the scheduler's)."""

    def _grow(self, q: RequestState, n: int) -> None:
        """Allocate ``n`` more blocks to ``q`` (``allocate_slots()``'s new blocks)."""
        q.num_blocks += n
        if self.prefix_caching:
            self.pool.allocate(n, q.blocks)
        else:
            self.pool.take(n)
            ids = self.gpu_ids
            if ids is not None:  # CPU KV offload: vLLM's block ids (v1.offload), the queue's front first
                q.blocks.extend(ids.pop() for _ in range(n))

    def _take_hits(self, q: RequestState, hits: list[int], new_blocks: int) -> None:
        """``q``'s blocks at admission: its prefix-cache hits (taken from the free queue or
        shared) then ``new_blocks`` fresh ones (``allocate_slots()``'s computed and new blocks)."""
        h = len(hits)
        if self.prefix_caching:
            self.pool.touch(hits)
            q.blocks = hits
            q.num_cached_blocks = q.num_cached_logical = h
        q.num_blocks = h
        if new_blocks:
            self._grow(q, new_blocks)

    # self typed as the base: KvEventOps._cache_recording calls BlockOps._cache(self, ...)
    def _cache(self: SchedulerState, q: RequestState, upto: int) -> None:
        """Register q's full computed blocks [num_cached_logical, upto) in the prefix cache
        (``cache_blocks()``).

        Blocks under a prompt key (shareable) are registered now. Blocks keyed to
        the request alone (``(ordinal, i)``: outputs, unshared prompt tail) can
        only be looked up by the request itself after a preemption, so while it
        has never been preempted their registration waits for its release
        (``num_cached_blocks`` = registered, ``num_cached_logical`` = registered as
        vLLM would have it).
        A resumed request registers them at once: its earlier blocks may still
        sit in the free queue under the same keys, and evictions in between
        must see the same cache as vLLM.
        """
        if upto <= q.num_cached_logical:
            return
        q.num_cached_logical = upto
        i = q.num_cached_blocks
        npk = q.num_prompt_keys
        if i < npk:
            shared = npk if npk < upto else upto
            self.pool.insert_run(q.blocks[i:shared], q.prompt_keys[i:shared])
            q.num_cached_blocks = i = shared
        if upto > i and q.num_preemptions:
            self._register_own(q, upto)

    def _register_own(self, q: RequestState, upto: int) -> None:
        """Register blocks [num_cached_blocks, upto), all beyond the prompt keys."""
        i = q.num_cached_blocks
        bl = q.blocks[i:upto]
        keys: list[Hashable] = list(zip(repeat(q.ordinal), range(i, upto)))
        # plain stores: a stale entry of the request's own earlier run is
        # overwritten (the mirror's rule since the first version)
        self.pool.store(bl, keys)
        q.num_cached_blocks = upto

    def _release(self, q: RequestState, finished: bool = False) -> None:
        """Free q's blocks (``KVCacheManager.free()``: tail block first, as vLLM frees
        them); ``finished``: it will never be scheduled again."""
        if self.prefix_caching:
            if finished and not q.num_preemptions:
                # Its blocks past the prompt keys were registered only logically
                # (see _cache) under keys nobody else can look up, and it never
                # will again: vLLM frees them as cached blocks, so they go to the
                # cached part of the free queue, but with no key (v1.pool.release).
                ncached = q.num_cached_blocks
                hashed = q.num_cached_logical if q.num_cached_logical > ncached else ncached
                keys = q.prompt_keys[:ncached] if ncached < q.num_prompt_keys else q.prompt_keys
                if hashed > ncached:
                    keys = keys + [None] * (hashed - ncached)
            else:
                if q.num_cached_logical > q.num_cached_blocks:
                    self._register_own(q, q.num_cached_logical)
                hashed = q.num_cached_blocks
                npk = q.num_prompt_keys
                if hashed <= npk:
                    keys = q.prompt_keys[:hashed]
                else:
                    keys = q.prompt_keys + list(zip(repeat(q.ordinal), range(npk, hashed)))
            self.pool.release(q.blocks, hashed, keys)
            q.blocks = []
            q.num_cached_blocks = q.num_cached_logical = 0
        else:
            self.pool.give(q.num_blocks)
            ids = self.gpu_ids
            if ids is not None:  # freed tail first to the queue's front: reused last block first
                ids.extend(q.blocks)
                q.blocks = []
        q.num_blocks = 0

    def _preempt(self, q: RequestState) -> None:
        """Preempt ``q`` by recompute (``Scheduler._preempt_request()``): its blocks are
        freed, its computed tokens reset, and it goes back to the waiting queue's front
        (priority: into the heap)."""
        self._release(q)
        q.status = PREEMPTED
        q.num_computed_tokens = 0
        q.num_preemptions += 1
        if self.by_priority:
            heapq.heappush(self.waiting_heap, q)
        else:
            self.waiting_fifo.appendleft(q)
