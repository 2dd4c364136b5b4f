"""KV-cache events of the ``vllm-v1`` mirror, exactly where vLLM's ``BlockPool`` emits them.

vLLM (``vllm/v1/core/block_pool.py``, read at vllm-project/vllm@002f349 and the
0.33 layout it keeps): ``cache_full_blocks`` appends one ``BlockStored`` per
call for the blocks ``[num_cached_blocks, num_full_blocks)`` it registers, with
the hash of block ``num_cached_blocks - 1`` as parent (None for a request's
first block); ``get_new_blocks`` -> ``_maybe_evict_cached_block`` appends a
``BlockRemoved`` with one hash for each cached block it pops from the free
queue to reuse; ``reset_prefix_cache`` appends ``AllBlocksCleared``. Freeing a
block emits nothing (it stays cached until evicted). The scheduler takes the
queue once per step (``KVCacheManager.take_events``) and publishes one batch.

Here: :meth:`KvEventOps.enable_kv_events` swaps in :class:`EventPool` (a
:class:`~.pool.BlockPool` whose ``allocate`` also reports evictions, from a
block -> hash map of the blocks vLLM would hold hashed) and a recording
``_cache`` (``BlockOps._cache`` is the mirror's ``cache_blocks()``: one event
when it advances a request's registration mark). Nothing of this exists in a
replay that did not ask: the plain pool and methods run, unchanged.

Fast paths while recording (docs/vllm.md, "KV events"): the decode group
(:mod:`.group`) hands blocks to its members lazily, so it is off; the
per-request spans (:meth:`~.spans.Spans._apply_span`) stay on, and their
events are rebuilt in step order afterwards: at each step of the span, in
running order, a request's new block (an eviction if the pop reused a cached
block: anonymous free blocks go first, as the pool pops them) then its newly
full block. The events and their order equal a step-by-step run's (tested
against ``max_span: 1``); a span's events come out with its record, as one
batch, where vLLM would publish one per step. tickgate never resets the prefix
cache, so ``AllBlocksCleared`` does not occur. Without prefix caching vLLM
registers nothing and emits nothing; neither does the mirror.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from tickgate import BlockRemoved, BlockStored, PluginError, Request, external_block_hash

from .blocks import BlockOps
from .pool import BlockPool
from .request import RequestState, prompt_block_keys
from .spans import Spans
from .state import SchedulerState


class EventPool(BlockPool):
    """The block pool, recording ``BlockRemoved`` for each cached block it evicts.

    ``hashes``: block -> the hash its ``BlockStored`` carried, for every block
    vLLM would hold hashed (free or held); an eviction pops the entry. Blocks
    popped from the anonymous part of the free queue are new ids, never in it.
    """

    __slots__ = ("events", "hashes")

    def __init__(self, num_gpu_blocks: int, caching: bool) -> None:
        super().__init__(num_gpu_blocks, caching)
        self.hashes: dict[int, int] = {}
        self.events: list[Any] = []

    def allocate(self, n: int, into: list[int]) -> None:
        start = len(into)
        anon = self.anon_free
        BlockPool.allocate(self, n, into)
        if n > anon:  # some came from the cached part of the queue: evictions, in pop order
            pop = self.hashes.pop
            self.events += [
                BlockRemoved((h,)) for h in map(pop, into[start + anon :], repeat(None)) if h is not None
            ]


class KvEventOps(SchedulerState):
    """The KV-event capability of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    records_kv_events = True

    def enable_kv_events(self) -> None:
        if isinstance(self.pool, EventPool) or getattr(self, "kv_events_on", False):
            raise PluginError("vllm-v1: enable_kv_events called twice")
        if self.total_steps or self.pool.used:
            raise PluginError("vllm-v1: enable_kv_events must be called before the first step")
        self.kv_events_on = True
        self.group_ok = False  # the decode group deals blocks out lazily (module docstring)
        if self.prefix_caching:
            self.pool = EventPool(self.cfg.num_gpu_blocks, True)
            self.kv_sample = (0, self.pool.usable)
            self._cache = self._cache_recording
            self._apply_span = self._apply_span_recording

    def drain_kv_events(self) -> list[Any]:
        pool = self.pool
        if type(pool) is not EventPool:
            return []
        out = pool.events
        pool.events = []
        return out

    def prompt_block_hashes(self, request: Request) -> list[int]:
        if not self.prefix_caching:
            return []
        return [
            external_block_hash(k)
            for k in prompt_block_keys(request, self.block_size, self.prefix_block_size)
        ]

    # -- recording ------------------------------------------------------------
    def _stored(self, q: RequestState, a: int, b: int) -> BlockStored:
        """The ``BlockStored`` of q's blocks [a, b), their hashes noted in the pool."""
        key = q.key
        hashes = tuple([external_block_hash(key(i)) for i in range(a, b)])
        pool: EventPool = self.pool  # type: ignore[assignment]  # recording runs only on the EventPool that enable_kv_events installed
        pool.hashes.update(zip(q.blocks[a:b], hashes))
        bs = self.block_size
        return BlockStored(hashes, external_block_hash(key(a - 1)) if a else None, (b - a) * bs, bs)

    def _cache_recording(self, q: RequestState, upto: int) -> None:
        old = q.num_cached_logical
        BlockOps._cache(self, q, upto)
        if q.num_cached_logical > old:
            pool: EventPool = self.pool  # type: ignore[assignment]  # recording runs only on the EventPool that enable_kv_events installed
            pool.events.append(self._stored(q, old, q.num_cached_logical))

    def _apply_span_recording(self, n: int, firsts: list[int]) -> None:
        """``Spans._apply_span``, then its events rebuilt in step order (module docstring)."""
        pool: EventPool = self.pool  # type: ignore[assignment]  # recording runs only on the EventPool that enable_kv_events installed
        bs = self.block_size
        running = self.running
        before = [(q.num_tokens, q.num_cached_logical) for q in running]
        anon = pool.anon_free
        mark = len(pool.events)
        del self._cache  # the span registers with the plain method; its events are built below
        try:
            Spans._apply_span(self, n, firsts)
        finally:
            self._cache = self._cache_recording
        removed = pool.events[mark:]
        del pool.events[mark:]
        # (step, running index, 0 = new block / 1 = newly full blocks, first block, end block)
        items: list[tuple[int, int, int, int, int]] = []
        for i, (_q, k0, (T0, L0)) in enumerate(zip(running, firsts, before)):
            for k in range(k0 if k0 > 0 else 0, n, bs):
                items.append((k, i, 0, 0, 0))
            upto = T0 // bs  # blocks full once step 0's token is computed
            if upto > L0:
                items.append((0, i, 1, L0, upto))
            k = bs - T0 % bs if T0 % bs else bs  # next step at which a block fills
            while k < n:
                upto = (T0 + k) // bs
                items.append((k, i, 1, upto - 1, upto))
                k += bs
        items.sort()
        events = pool.events
        taken = 0
        used = 0
        for _, i, kind, a, b in items:
            if kind == 0:
                taken += 1
                if taken > anon:  # popped from the cached part of the queue: an eviction
                    if used >= len(removed):  # pragma: no cover - every such pop evicted a hash
                        raise PluginError("vllm-v1: a span popped more cached blocks than it evicted")
                    events.append(removed[used])
                    used += 1
            else:
                events.append(self._stored(running[i], a, b))
        if used != len(removed):  # pragma: no cover - see above
            raise PluginError(f"vllm-v1: a span evicted {len(removed)} blocks, {used} placed")
