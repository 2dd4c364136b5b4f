"""The ``trtllm`` scheduler: TensorRT-LLM's in-flight batching step.

Each step runs the capacity scheduler (:mod:`.capacity`, policy
``capacity_scheduler_policy``) over the active requests in arrival order,
frees the blocks of the requests it paused, then the micro-batch scheduler
(:mod:`.micro_batch`) picks what runs within ``max_batch_size`` and
``max_num_tokens``. Context (prefill) chunks and generation tokens run in the
same step. A request's KV blocks (``tokens_per_block`` tokens each) are
allocated for its whole prompt when its first context chunk runs and grow one
block at a time in generation; the last context chunk emits the first token.

A paused request (MAX_UTILIZATION only) loses its blocks and keeps its place
in the active list; it runs its context again over prompt plus the tokens it
had generated (TensorRT-LLM's ``LlmRequest::pause``).

With ``enable_block_reuse`` (on, as in TensorRT-LLM's ``KvCacheConfig``) and a
workload that says what prompts hold (prefix blocks or token ids), blocks are
found again in the cache when a context starts (:mod:`.prefix_reuse`,
:mod:`.block_reuse`); without that information every block is anonymous and
the step is exactly the one without reuse.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping
from typing import Any

from tickgate import (
    BuildContext,
    Horizon,
    InputError,
    ReplayError,
    Request,
    RequestOutcome,
    Scheduler,
    TickRecord,
    completed_outcome,
    rejected_outcome,
)

from .capacity import guaranteed_no_evict, max_utilization
from .micro_batch import micro_batch
from .options import OPTIONS_SCHEMA, resolve_kv_cache_max_tokens
from .prefix_reuse import KvReuse


class _Req:
    """TensorRT-LLM's ``LlmRequest`` as far as scheduling sees it."""

    __slots__ = (
        "admitted_ms",
        "admitted_tick",
        "arrival_ms",
        "arrival_tick",
        "blocks",
        "context_done",
        "decoded",
        "first_token_ms",
        "first_token_tick",
        "hit_tokens",
        "ident",
        "ident_done",
        "in_generation",
        "keyed",
        "kv",
        "kv_len",
        "pauses",
        "prompt_len",
        "request",
        "seq",
        "tpb",
    )

    def __init__(
        self, request: Request, seq: int, tpb: int, tick: int, now_ms: float, keyed: bool = False
    ) -> None:
        self.request = request
        self.seq = seq
        self.tpb = tpb
        self.prompt_len = request.prompt_tokens  # grows by the generated tokens when paused
        self.context_done = 0
        self.decoded = 0
        self.kv_len = 0
        self.blocks = 0
        self.in_generation = False
        self.pauses = 0
        self.arrival_tick = tick
        self.arrival_ms = now_ms
        self.admitted_tick: int | None = None
        self.admitted_ms: float | None = None  # when the step of its first admission started
        self.first_token_tick: int | None = None
        self.first_token_ms: float | None = None
        # block reuse (prefix_reuse): whether the workload says what its prompt holds, that
        # identity (computed when first needed), its blocks while it holds any, tokens found
        self.keyed = keyed
        self.ident: Any = None
        self.ident_done = False
        self.kv: list[Any] | None = None
        self.hit_tokens = 0

    @property
    def started(self) -> bool:
        return self.in_generation or self.context_done > 0

    def blocks_to_completion(self) -> int:
        total = self.request.prompt_tokens + self.request.max_output_tokens
        return max(0, -(-total // self.tpb) - self.blocks)

    def blocks_next_step(self) -> int:
        if self.in_generation:
            return 1 if self.kv_len % self.tpb == 0 else 0
        if self.context_done == 0:
            return -(-self.prompt_len // self.tpb)
        return 0

    def context_remaining(self) -> int:
        return self.prompt_len - self.context_done


class TrtllmScheduler(Scheduler):
    name = "trtllm"
    description = (
        "TensorRT-LLM mirror: capacity scheduler (GUARANTEED_NO_EVICT, MAX_UTILIZATION, "
        "STATIC_BATCH) then a micro-batch bounded by max_batch_size and max_num_tokens."
    )
    options_schema = OPTIONS_SCHEMA
    uses_admission_policy = False
    admission_note = (
        "TensorRT-LLM schedules its active requests in arrival order through capacity_scheduler_policy"
    )
    uses_kv_allocator = False
    #: the step that ends a context samples its first token (a paused request's next) without listing
    #: it in ``decoded``: the report's inter-token gaps read records by it
    decoded_lists_every_sample = False
    supports_data_parallel = True  # attention DP: one scheduler per rank (each its own KV pool)

    def __init__(self, options: Mapping[str, Any], ctx: BuildContext) -> None:
        options, self.kv_capacity = resolve_kv_cache_max_tokens(options, ctx.timing)
        self.tpb = options.get("tokens_per_block", 32)
        blocks = options.get("kv_cache_blocks")
        max_tokens = options.get("kv_cache_max_tokens")
        if (blocks is None) == (max_tokens is None):
            raise InputError(
                None,
                "give exactly one of kv_cache_blocks and kv_cache_max_tokens",
                json_path="$.scheduler.options",
            )
        self.total_blocks = blocks if blocks is not None else max_tokens // self.tpb
        if self.total_blocks < 1:
            raise InputError(
                None,
                f"kv_cache_max_tokens {max_tokens} is less than one block of {self.tpb}",
                json_path="$.scheduler.options.kv_cache_max_tokens",
            )
        self.max_batch_size = options.get("max_batch_size", 2048)
        self.max_num_tokens = options.get("max_num_tokens", 8192)
        self.policy = options.get("capacity_scheduler_policy", "GUARANTEED_NO_EVICT")
        self.chunking = (
            options.get("context_chunking_policy", "FIRST_COME_FIRST_SERVED")
            if options.get("enable_chunked_context", False)
            else None
        )
        self.max_context_length = options.get("max_context_length")
        self.clock = ctx.clock
        self.timing = ctx.timing
        self.block_reuse = options.get("enable_block_reuse", True)
        self.partial_reuse = options.get("enable_partial_reuse", True)
        self.copy_on_partial_reuse = options.get("copy_on_partial_reuse", True)
        self.prefix_block_size = ctx.prefix_block_size
        #: block reuse, from the first request whose prompt content the workload describes
        self.reuse: KvReuse | None = None
        self.contexts: list[_Req] = []  # context state (new, chunking, paused), by arrival
        self.generating: list[_Req] = []  # generation in progress, by arrival
        self.used_blocks = 0
        self.seq = 0
        self.outcomes: list[RequestOutcome] = []
        self.rejected_now: list[str] = []
        self.pauses = 0
        self.paused_ids: set[str] = set()
        self.chunks = 0
        self.peak_batch_tokens = 0

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: BuildContext) -> TrtllmScheduler:
        return cls(options, ctx)

    # -- engine protocol -------------------------------------------------------
    def add(self, request: Request) -> None:
        need = -(-(request.prompt_tokens + request.max_output_tokens) // self.tpb)
        if need > self.total_blocks:
            self._reject(
                request,
                f"needs {need} KV blocks to completion; the cache has {self.total_blocks}",
                key="needs more KV blocks to completion than the cache has",
                figures={"needed_blocks": need, "cache_blocks": self.total_blocks},
            )
            return
        if self.chunking is None and request.prompt_tokens > self.max_num_tokens:
            self._reject(
                request,
                f"prompt of {request.prompt_tokens} tokens exceeds max_num_tokens "
                f"{self.max_num_tokens} and chunked context is off",
                key="prompt exceeds max_num_tokens and chunked context is off",
                figures={"prompt_tokens": request.prompt_tokens, "max_num_tokens": self.max_num_tokens},
            )
            return
        self.seq += 1
        keyed = self.block_reuse and (
            request.prefix_blocks is not None or request.prompt_token_ids is not None
        )
        if keyed and self.reuse is None:
            self.reuse = KvReuse(
                self.total_blocks,
                self.total_blocks - self.used_blocks,
                self.tpb,
                self.prefix_block_size,
                partial_reuse=self.partial_reuse,
                copy_on_partial_reuse=self.copy_on_partial_reuse,
            )
        self.contexts.append(_Req(request, self.seq, self.tpb, self.clock.tick, self.clock.now_ms, keyed))

    def has_work(self) -> bool:
        return bool(self.contexts or self.generating or self.rejected_now)

    def pop_outcomes(self) -> list[RequestOutcome]:
        out, self.outcomes = self.outcomes, []
        return out

    def kv_capacity_pages(self) -> int:
        return self.total_blocks

    def kv_used_pages(self) -> int:
        return self.used_blocks

    def prefix_hit_tokens(self) -> int:
        """Prompt tokens found in the KV cache at requests' first admissions (a fleet's
        ``prefix_cache_hit_rate`` divides them by the prompt tokens)."""
        return self.reuse.hit_tokens if self.reuse is not None else 0

    def decode_slots_per_tick(self) -> int:
        return self.max_batch_size

    def extra_summary(self) -> Mapping[str, Any]:
        out: dict[str, Any] = {
            "engine": "trtllm",
            "capacity_scheduler_policy": self.policy,
            "context_chunking_policy": self.chunking,
            "pauses": self.pauses,
            "paused_requests": len(self.paused_ids),
            "context_chunks": self.chunks,
            "peak_batch_tokens": self.peak_batch_tokens,
        }
        if self.kv_capacity is not None:  # kv_cache_max_tokens: auto (reports without it unchanged)
            out["kv_capacity"] = self.kv_capacity
        if self.reuse is not None:  # a workload with prefix information (reports without it unchanged)
            out["block_reuse"] = self.reuse.summary(self.partial_reuse, self.copy_on_partial_reuse)
        return out

    # -- one step --------------------------------------------------------------
    def step(self, horizon: Horizon) -> TickRecord:
        tick = self.clock.tick
        rejected = tuple(self.rejected_now)
        self.rejected_now = []
        free = self.total_blocks - self.used_blocks
        paused: list[_Req] = []
        reuse = self.reuse
        skip = reuse.skipper() if reuse is not None and self.policy != "STATIC_BATCH" else None
        if self.policy == "MAX_UTILIZATION":
            fitting, paused = max_utilization(
                self.generating,
                self.contexts,
                free,
                self.max_batch_size,
                skip=skip,
                freed_by=reuse.sole_blocks() if reuse else None,
            )
        else:
            fitting = guaranteed_no_evict(
                self.generating,
                self.contexts,
                free,
                self.max_batch_size,
                static_batch=self.policy == "STATIC_BATCH",
                skip=skip,
            )
        for req in paused:
            self._pause(req)
        contexts, generation = micro_batch(
            fitting,
            max_batch_size=self.max_batch_size,
            max_num_tokens=self.max_num_tokens,
            chunking=self.chunking,
            chunk_unit=self.tpb,
            max_context_length=self.max_context_length,
        )
        if not contexts and not generation and not paused:
            if self.contexts or self.generating:
                raise ReplayError(
                    f"trtllm: {len(self.contexts)} requests wait, {len(self.generating)} "
                    "generate, and no step can be scheduled"
                )
            return TickRecord(tick=tick, rejected=rejected, duration_ms=self._duration(0, 0, 0))

        grown = 0
        admitted: list[str] = []
        chunks: dict[str, int] = {}
        finished_context: list[_Req] = []
        pairs = earlier = 0  # the chunks' shape, for the timing model's price_step
        hits: dict[str, int] = {}
        for req, size in contexts:
            if req.context_done == 0:
                if reuse is not None:
                    need = -(-req.prompt_len // self.tpb)
                    if self.used_blocks + need > self.total_blocks:
                        raise ReplayError(
                            f"trtllm: {req.request.id} needs {need} blocks, "
                            f"{self.total_blocks - self.used_blocks} free"
                        )
                    size, taken, hit = reuse.allocate(req, size)
                    grown += self._grow(req, -(-req.prompt_len // self.tpb), taken)
                    if hit:
                        hits[req.request.id] = hit
                else:
                    grown += self._grow(req, -(-req.prompt_len // self.tpb))
                admitted.append(req.request.id)
                if req.admitted_tick is None:
                    req.admitted_tick = tick
                    req.admitted_ms = self.clock.now_ms
            pairs += size * req.context_done + size * (size + 1) // 2
            earlier += req.context_done
            req.context_done += size
            chunks[req.request.id] = size
            if req.context_done >= req.prompt_len:
                finished_context.append(req)
            else:
                self.chunks += 1
        context = 0
        decoding = [r.request.id for r in generation]
        for req in generation:
            context += req.kv_len
            req.kv_len += 1
            extra = self._grow(req, -(-req.kv_len // self.tpb))
            if extra and reuse is not None:
                reuse.grow(req, extra)
            grown += extra
            req.decoded += 1
        prefill = sum(chunks.values())
        batch_tokens = prefill + len(generation)
        self.peak_batch_tokens = max(self.peak_batch_tokens, batch_tokens)
        duration: float | None
        if contexts and self.timing is not None and self.timing.prices_shape:
            duration = self.timing.price_step(
                prefill, len(generation), context, len(contexts), pairs, earlier
            )
        else:
            duration = self._duration(prefill, len(generation), context)
        end_ms = self.clock.now_ms + duration if duration is not None else None
        used = self.used_blocks

        completed: list[str] = []
        for req in finished_context:
            req.kv_len = req.prompt_len
            if reuse is not None:
                reuse.context_done(req)
            req.decoded += 1
            if req.first_token_tick is None:
                req.first_token_tick, req.first_token_ms = tick, end_ms
            self._remove(self.contexts, req)
            if req.decoded >= req.request.max_output_tokens:
                completed.append(req.request.id)
                self._finish(req, tick, end_ms)
            else:
                req.in_generation = True
                insort(self.generating, req, key=lambda r: r.seq)
        for req in generation:
            if req.decoded >= req.request.max_output_tokens:
                completed.append(req.request.id)
                self._remove(self.generating, req)
                self._finish(req, tick, end_ms)
        started_ctx = sum(1 for r in self.contexts if r.context_done > 0)
        detail: dict[str, Any] = {"batch_tokens": batch_tokens, "scheduled": len(fitting)}
        if chunks:
            detail["context_chunks"] = chunks
        if hits:
            detail["prefix_hit_tokens"] = hits
        return TickRecord(
            tick=tick,
            admitted=tuple(admitted),
            prefill_tokens=prefill,
            decoded=tuple(decoding),
            decode_tokens=len(decoding),
            queued=len(self.contexts) - started_ctx,
            active=len(self.generating) + started_ctx + len(completed),
            kv_pages_used=used,
            kv_pages_reserved=grown,
            completed=tuple(completed),
            preempted=tuple(r.request.id for r in paused),
            rejected=rejected,
            duration_ms=duration,
            detail=detail,
        )

    # -- helpers ---------------------------------------------------------------
    def _grow(self, req: _Req, blocks: int, taken: int | None = None) -> int:
        """The request's sequence now has ``blocks`` blocks; ``taken`` of the new ones came
        from the free pool (all of them unless some are shared through block reuse)."""
        extra = blocks - req.blocks
        if extra <= 0:
            return 0
        if taken is None:
            taken = extra
        if self.used_blocks + taken > self.total_blocks:
            raise ReplayError(
                f"trtllm: {req.request.id} needs {taken} blocks, {self.total_blocks - self.used_blocks} free"
            )
        req.blocks = blocks
        self.used_blocks += taken
        return taken

    def _release(self, req: _Req) -> None:
        """The request gives its blocks back (stored for reuse first, ``releaseBlocks``)."""
        if self.reuse is not None:
            self.used_blocks -= self.reuse.release(req, max(req.kv_len, req.context_done))
        else:
            self.used_blocks -= req.blocks
        req.blocks = 0

    def _pause(self, req: _Req) -> None:
        self._release(req)
        req.kv_len = 0
        req.context_done = 0
        req.prompt_len = req.request.prompt_tokens + req.decoded
        req.pauses += 1
        self.pauses += 1
        self.paused_ids.add(req.request.id)
        if req.in_generation:
            req.in_generation = False
            self._remove(self.generating, req)
            insort(self.contexts, req, key=lambda r: r.seq)

    @staticmethod
    def _remove(queue: list[_Req], req: _Req) -> None:
        i = bisect_left(queue, req.seq, key=lambda r: r.seq)
        if i >= len(queue) or queue[i] is not req:  # pragma: no cover - internal invariant
            raise ReplayError(f"trtllm: {req.request.id} missing from its queue")
        del queue[i]

    def _duration(self, prefill: int, seqs: int, context: int) -> float | None:
        return self.timing.step_ms(prefill, seqs, context) if self.timing is not None else None

    def _finish(self, req: _Req, tick: int, end_ms: float | None) -> None:
        self._release(req)
        self.outcomes.append(
            completed_outcome(
                req.request,
                arrival_tick=req.arrival_tick,
                admitted_tick=req.admitted_tick,
                first_token_tick=req.first_token_tick,
                finished_tick=tick,
                output_tokens=req.decoded,
                arrival_ms=req.arrival_ms if self.timing is not None else None,
                admitted_ms=req.admitted_ms if self.timing is not None else None,
                first_token_ms=req.first_token_ms,
                finished_ms=end_ms,
                preemptions=req.pauses,
                prefix_hit_tokens=req.hit_tokens,
            )
        )

    def _reject(self, request: Request, reason: str, *, key: str, figures: Mapping[str, int]) -> None:
        self.rejected_now.append(request.id)
        self.outcomes.append(
            rejected_outcome(request, reason, tick=self.clock.tick, key=key, figures=figures)
        )
