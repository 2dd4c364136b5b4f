"""Block reuse in the ``trtllm`` step: where the scheduler meets :mod:`.block_reuse`.

What TensorRT-LLM does, and where (``cpp/tensorrt_llm/batch_manager/``,
``tensorrt_llm/_torch/pyexecutor/resource_manager.py``):

* Matching is lazy: a request's blocks are looked up when its first context
  chunk has been scheduled and its KV cache is allocated (``addSequence`` →
  ``loadOrAllocateBlocks``), not on arrival; the capacity and micro-batch
  schedulers have already counted its whole prompt (blocks to completion,
  tokens in ``max_num_tokens``), so reuse never lets more requests in, it makes
  the step cheaper and holds fewer blocks. The tokens found become
  ``prepopulatedPromptLen`` and ``LlmRequest::setPrepopulatedPromptLen`` moves
  the context position past them: the chunk now ends where it would have
  (rounded down to a block boundary unless it is the last chunk), so the step
  computes ``chunk - found`` tokens fewer.
* Blocks a request finds held by another request are shared, not taken from
  the free pool; blocks it finds free are claimed out of the free queue.
* ``beneficialToSkip`` (``capacityScheduler.cpp``): a context not started yet
  is left for this step when the first full block of its prompt the tree lacks
  is also the first new block of a context already running or scheduled
  earlier in the walk, so that it can reuse that block once stored (not for
  ``STATIC_BATCH``).
* Stored at the end of a context (``KVCacheManager.update_resources`` →
  ``storeContextBlocks``), and with everything computed when the request
  finishes or is paused (``removeSequence`` → ``releaseBlocks``).

Hit accounting follows the other mirrors: ``prefix_hit_tokens`` are the tokens
found at a request's first admission (a re-run after a pause finds its own
blocks again; those count in ``reused_tokens`` only).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from .block_keys import PromptIdentity, prompt_identity
from .block_reuse import BlockReuse


class KvReuse:
    """The scheduler's block-reuse state: the pool's tree and queue, identities, totals."""

    def __init__(
        self,
        total_blocks: int,
        free_blocks: int,
        tpb: int,
        prefix_block_size: int | None,
        *,
        partial_reuse: bool,
        copy_on_partial_reuse: bool,
    ) -> None:
        self.tpb = tpb
        self.prefix_block_size = prefix_block_size
        self.pool = BlockReuse(
            free_blocks, tpb, partial_reuse=partial_reuse, copy_on_partial_reuse=copy_on_partial_reuse
        )
        self.requests = 0  # requests with identity
        self.prompt_tokens = 0  # their prompt tokens (the hit rate's denominator)
        self.hit_tokens = 0  # found at first admissions
        self.skipped = 0  # steps a context was left for a block another context is computing
        #: contexts with identity that have started and not finished (by arrival number, in the
        #: order they started): the blocks they will contribute are known to the skip check
        self.running: dict[int, Any] = {}

    def identity(self, req: Any) -> PromptIdentity | None:
        """The request's prompt identity, computed when first needed."""
        if not req.ident_done:
            req.ident = prompt_identity(req.request, self.tpb, self.prefix_block_size)
            req.ident_done = True
        return req.ident

    # -- the capacity scheduler ------------------------------------------------
    def skipper(self) -> Callable[[Any], bool]:
        """``beneficialToSkip`` for one capacity-scheduling walk; the blocks the contexts already
        running will contribute are registered first (``prefillWithChunkedContextsAlreadyExecuting``)."""
        contributed: set[Hashable] = set()
        pool = self.pool
        for req in self.running.values():
            key = pool.first_new_block(self.identity(req), req.seq, req.prompt_len)
            if key is not None:
                contributed.add(key)

        def skip(req: Any) -> bool:
            if req.started or not req.keyed:
                return False
            key = pool.first_new_block(self.identity(req), req.seq, req.prompt_len)
            if key is None:
                return False
            if key in contributed:
                self.skipped += 1
                return True
            contributed.add(key)
            return False

        return skip

    def sole_blocks(self) -> Callable[[Any], int]:
        """Blocks a paused request would free in this walk (``schedulingRemoveSequence``: a
        block shared with a request still running is not freed)."""
        dropped: dict[int, int] = {}

        def freed(req: Any) -> int:
            if req.kv is None:
                return req.blocks
            n = 0
            for b in req.kv:
                d = dropped.get(id(b), 0) + 1
                dropped[id(b)] = d
                if d == b.refs:
                    n += 1
            return n

        return freed

    # -- a step's contexts -----------------------------------------------------
    def allocate(self, req: Any, size: int) -> tuple[int, int, int]:
        """KV for a context starting now: (chunk tokens to compute, blocks from the free pool,
        tokens found)."""
        if not req.keyed:
            n = -(-req.prompt_len // self.tpb)
            self.pool.take(n)
            return size, n, 0
        m = self.pool.match(self.identity(req), req.seq, req.prompt_len)
        req.kv = m.blocks
        self.running[req.seq] = req
        hit = m.hit_tokens
        if req.admitted_tick is None:
            self.requests += 1
            self.prompt_tokens += req.request.prompt_tokens
            self.hit_tokens += hit
            req.hit_tokens = hit
        if hit:
            end = hit + size
            size = end // self.tpb * self.tpb - hit if end < req.prompt_len else req.prompt_len - hit
            req.context_done = hit
        return size, m.from_free, hit

    def grow(self, req: Any, extra: int) -> None:
        """``extra`` blocks from the front of the free queue for a generating request."""
        self.pool.take(extra, req.kv if req.keyed else None)

    def context_done(self, req: Any) -> None:
        """``storeContextBlocks``: the prompt's full blocks enter the tree."""
        if req.kv is not None:
            self.running.pop(req.seq, None)
            self.pool.store(req.kv, self.identity(req), req.seq, req.prompt_len, full_only=True)

    def release(self, req: Any, computed: int) -> int:
        """``releaseBlocks``: store what was computed, then drop the request's references;
        returns the blocks that became free."""
        if req.kv is None:
            self.pool.release_anonymous(req.blocks)
            return req.blocks
        self.running.pop(req.seq, None)
        if computed > 0:
            self.pool.store(req.kv, self.identity(req), req.seq, computed, full_only=False)
        freed = self.pool.release(req.kv)
        req.kv = None
        return freed

    def summary(self, partial_reuse: bool, copy_on_partial_reuse: bool) -> dict[str, Any]:
        seen = self.prompt_tokens
        return {
            "enable_partial_reuse": partial_reuse,
            "copy_on_partial_reuse": copy_on_partial_reuse,
            "requests": self.requests,
            "prompt_tokens": seen,
            "prefix_hit_tokens": self.hit_tokens,
            "prefix_hit_rate": round(self.hit_tokens / seen, 6) if seen else 0.0,
            **self.pool.summary(),
            "skipped_for_reuse": self.skipped,
        }
