"""A request's KV memory in the ``sglang`` mirror: its radix-tree key, ``match_kv_cache``,
``checkpoint_into_tree``, ``release_kv_cache`` and ``evict_to_free_tokens`` over the tree
(:mod:`.radix_cache`) and the token pool (``token_to_kv_pool_allocator.available_size()``)."""

from __future__ import annotations

from collections.abc import Hashable
from itertools import chain

from tickgate import (
    Request,
)

from .request_state import Req, sequence_key
from .scheduler_state import SchedulerState


class KvMemory(SchedulerState):
    """A request's KV in the radix tree and the token pool, for :class:`~.scheduler.SglangScheduler`
    (a mixin): radix keys, matching, checkpoints into the tree, release and eviction."""

    # -- content and memory ----------------------------------------------------
    def _key(self, request: Request, max_new: int) -> tuple[Hashable, ...]:
        """Radix units of the request's sequence (see :mod:`.request_state`)."""
        if not self.radix:
            return ()
        p = self.page
        if request.prompt_token_ids is not None:
            ids = request.prompt_token_ids[: request.prompt_tokens]
            prompt_units: tuple[Hashable, ...] = tuple(
                tuple(ids[i : i + p]) for i in range(0, len(ids) - p + 1, p)
            )
        elif request.prefix_blocks is not None:
            prompt_units = self._block_pages(
                request.prefix_blocks[: request.prompt_tokens // self.block_size]
            )
        else:
            prompt_units = ()
        return sequence_key(prompt_units, request.prompt_tokens, max_new, p, self.seq)

    def _block_pages(self, ids: tuple[Hashable, ...]) -> tuple[Hashable, ...]:
        """The radix units of the pages under workload block ids: a block of
        ``block_size`` tokens is ``block_size // page_size`` pages, matched, cached
        and evicted page by page as SGLang does. The first page of a block is its
        id, the others their offset in the block: two prefixes agree up to a page
        exactly when their ids agree up to its block."""
        tail = self.block_tail
        if not tail:
            return tuple(ids)
        return tuple(chain.from_iterable((bid, *tail) for bid in ids))

    @property
    def available(self) -> int:
        """``token_to_kv_pool_allocator.available_size()``."""
        return self.capacity - self.tree.total_size - self.own_tokens

    def _pages(self, tokens: int) -> int:
        return -(-tokens // self.page) * self.page

    def _set_own(self, req: Req, held: int) -> None:
        """The request now holds KV for ``held`` tokens (page-rounded), the first
        ``req.protected`` of them owned by the tree."""
        new = self._pages(held) - req.protected if held else 0
        self.own_tokens += new - req.own
        req.own = new

    def _evict_for(self, tokens: int) -> None:
        """``evict_to_free_tokens``: evict LRU cache for the shortfall."""
        short = tokens - self.available
        if short > 0:
            self.evicted += self.tree.evict(short)

    def match(self, req: Req, *, limit: bool = True) -> None:
        """``match_kv_cache``: the cached prefix of prompt + output, at most
        ``len - 1`` tokens when ``limit`` (``init_next_round_input``)."""
        if not req.key:
            req.prefix_len, req.last_node = 0, None
            return
        n = req.fill_len - 1 if limit else req.fill_len
        tokens, node = self.tree.match_prefix(req.key, req.weight, n // req.weight)
        req.prefix_len, req.last_node = tokens, node

    def _checkpoint(self, req: Req, up_to: int) -> None:
        """``checkpoint_into_tree``: insert the first ``up_to`` tokens (whole pages),
        move the request's lock onto the node the insert ended on; what the tree
        already held is freed from the request. With ``finished`` the tree is also
        split at the prompt's last whole page, so eviction can drop the output
        without the prompt."""
        if not req.key:
            return
        units = up_to // req.weight
        if units <= 0:
            return
        tree = self.tree
        _, node = tree.insert(req.key, req.weight, units)
        if req.finished:  # the node keeps ending at ``units`` (a split puts the new node above)
            prompt_units = req.request.prompt_tokens // req.weight
            if 0 < prompt_units < units:
                tree.insert(req.key, req.weight, prompt_units)
        old = req.lock_node
        tree.inc_lock_ref(node)
        if old is not None:
            tree.dec_lock_ref(old)
        req.lock_node = node
        req.last_node = node
        req.protected = units * req.weight
        self._set_own(req, req.kv_len)

    def _release(self, req: Req, *, checkpoint: bool) -> None:
        """``release_kv_cache``: optionally cache first, then drop the lock and free
        the request's own tokens."""
        if checkpoint:
            self._checkpoint(req, req.kv_len)
        if req.lock_node is not None:
            self.tree.dec_lock_ref(req.lock_node)
            req.lock_node = None
        self.own_tokens -= req.own
        req.own = 0
        req.protected = 0
