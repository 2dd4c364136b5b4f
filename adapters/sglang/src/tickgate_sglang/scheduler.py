"""The ``sglang`` scheduler: a step-for-step mirror of SGLang 0.5.23's scheduler loop.

One step is SGLang's ``Scheduler.get_next_batch_to_run`` (overlap scheduling off,
mixed chunked prefill off) followed by ``run_batch`` and ``process_batch_result``,
with one sampled token per request whose prefill is complete. The rules, each in
the function it follows (``python/sglang/srt/managers/scheduler.py`` unless named):

1. Start of the step (``get_next_batch_to_run``): the in-flight chunk is cached
   into the radix tree (``stash_chunked_request`` → ``checkpoint_kv_cache``), the
   last prefill batch joins the running batch (``merge_batch``), and a request
   leaving the running batch clears its ``batch_is_full`` flag.
2. Prefill (``_get_new_batch_prefill_raw``): skipped while ``batch_is_full`` with
   no chunk in flight; the waiting queue is ordered (:mod:`.schedule_policy`) and
   walked by a :class:`~.prefill_adder.PrefillAdder`: the in-flight chunk first,
   then each request in order, matched against the tree (``init_next_round_input``,
   at most ``len - 1`` tokens), until one does not fit -- ``NO_TOKEN`` sets
   ``batch_is_full``, so no prefill is tried again until a request leaves -- or the
   request rows (``max_running_requests``) run out. The batch allocates its extend
   (``alloc_for_extend``: evicting least-recently-used cache first, one page of
   slack per request when pages are larger than a token).
3. Decode otherwise (``update_running_batch``): if the next token of every running
   request does not fit after eviction (``ScheduleBatch.check_decode_mem``) the
   batch retracts (``retract_decode``, schedule_batch.py): fewest output tokens
   first, longest prompt on ties, until the rest fit, evicting cache for 20 tokens
   per remaining request after each; the ratio becomes ``(Σ output + 20 n) /
   (Σ max_new + 1)``. Otherwise ``new_token_ratio`` decays (``NewTokenRatioTracker``).
4. Results (``batch_result_processor.py``): a finished request caches its prompt
   and output into the tree and frees the rest (``release_kv_cache(checkpoint=True)``,
   the tree split at the prompt boundary); an unfinished prefill caches what it
   computed and moves its lock there (``checkpoint_kv_cache``); a chunk in flight
   is cached at the next step (rule 1).

KV is counted in tokens, allocated in pages of ``page_size``: the pool holds the
radix tree (cached prefixes, evictable unless a running request locks them) and
each request's own tokens past its tree-owned prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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

from .decode_batch import DecodeBatch
from .kv_memory import KvMemory
from .options import (
    CLIP_MAX_NEW_TOKENS,
    DEFAULT_INIT_NEW_TOKEN_RATIO,
    DEFAULT_MIN_NEW_TOKEN_RATIO_FACTOR,
    DEFAULT_NEW_TOKEN_RATIO_DECAY_STEPS,
    OPTIONS_SCHEMA,
    RETRACT_DECODE_STEPS,
    prefix_block_size,
    resolve_max_total_tokens,
)
from .prefill_adder import CONTINUE, NO_TOKEN, OTHER, PrefillAdder
from .radix_cache import RadixCache
from .request_state import Req
from .schedule_policy import SchedulePolicy
from .step_result import StepResults


class SglangScheduler(StepResults, DecodeBatch, KvMemory, Scheduler):
    name = "sglang"
    description = (
        "SGLang mirror: radix prefix cache (LRU), lpm/dfs-weight/fcfs/lof/random, new-token-ratio "
        "admission, decode retraction, chunked prefill."
    )
    options_schema = OPTIONS_SCHEMA
    uses_admission_policy = False
    admission_note = (
        "SGLang orders its waiting queue itself with schedule_policy (lpm, dfs-weight, fcfs, lof, random)"
    )
    uses_kv_allocator = False
    #: a prefill batch samples first tokens (and a retracted request's next) without listing them in
    #: ``decoded``: the report's inter-token gaps read records by it
    decoded_lists_every_sample = False
    supports_data_parallel = True  # dp-attention: one scheduler per rank (each its own KV pool)

    def __init__(self, options: Mapping[str, Any], ctx: BuildContext) -> None:
        options, self.kv_capacity = resolve_max_total_tokens(options, ctx.timing)
        self.page = options.get("page_size", 1)
        total = options["max_total_tokens"]
        self.capacity = total // self.page * self.page
        if self.capacity < self.page * 2:
            raise InputError(
                None,
                f"max_total_tokens {total} holds fewer than two pages of {self.page}",
                json_path="$.scheduler.options.max_total_tokens",
            )
        self.max_running = options.get("max_running_requests", 4096)
        # request rows (kv_cache_configurator.resolve_max_num_reqs with --max-running-requests)
        self.max_reqs = min(self.max_running, self.capacity // 2)
        self.max_prefill = options.get("max_prefill_tokens", 16384)
        chunk = options.get("chunked_prefill_size", 8192)
        self.chunk_size: int | None = chunk if chunk > 0 else None
        if self.chunk_size is not None and self.chunk_size < self.page:
            raise InputError(
                None,
                f"chunked_prefill_size {chunk} is smaller than page_size {self.page}",
                json_path="$.scheduler.options.chunked_prefill_size",
            )
        context = options.get("context_length")
        self.max_req_len = min(context, total) - 1 if context else total - 1
        self.policy_name = options.get("schedule_policy", "fcfs")
        conservativeness = options.get("schedule_conservativeness", 1.0)
        self.init_ratio = options.get(
            "init_new_token_ratio", min(DEFAULT_INIT_NEW_TOKEN_RATIO * conservativeness, 1.0)
        )
        self.min_ratio = options.get(
            "min_new_token_ratio", min(self.init_ratio * DEFAULT_MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        )
        if self.min_ratio > self.init_ratio:
            raise InputError(
                None,
                f"min_new_token_ratio {self.min_ratio} exceeds the initial ratio {self.init_ratio}",
                json_path="$.scheduler.options.min_new_token_ratio",
            )
        steps = options.get("new_token_ratio_decay_steps", DEFAULT_NEW_TOKEN_RATIO_DECAY_STEPS)
        self.decay = (self.init_ratio - self.min_ratio) / steps
        self.clip = options.get("clip_max_new_tokens_estimation", CLIP_MAX_NEW_TOKENS)
        self.retract_steps = options.get("retract_decode_steps", RETRACT_DECODE_STEPS)
        self.ignore_eos = options.get("ignore_eos", False)
        self.radix = not options.get("disable_radix_cache", False)
        self.block_size = prefix_block_size(options, ctx.prefix_block_size, self.page)
        #: what follows a block id in its pages' units (see _block_pages)
        self.block_tail = tuple(range(1, self.block_size // self.page))
        if not self.radix and self.policy_name in ("lpm", "dfs-weight"):
            self.policy_name = "fcfs"  # SchedulePolicy._validate_and_adjust_policy
        self.policy = SchedulePolicy(self.policy_name, options.get("random_seed", 0))
        self.clock = ctx.clock
        self.timing = ctx.timing
        self.tree = RadixCache()
        self.ratio = self.init_ratio

        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.chunked: Req | None = None
        self.last_prefill: list[Req] | None = None  # last_batch, when it was a prefill
        self.batch_is_full = False
        self.own_tokens = 0
        self.seq = 0
        self.outcomes: list[RequestOutcome] = []
        self.rejected_now: list[str] = []
        #: called with a dict per executed step, in the reference harness's format (conformance)
        self.observer: Callable[[dict[str, Any]], None] | None = None
        # totals
        self.total_hit = 0
        self.total_extend = 0
        self.retractions = 0
        self.retracted_ids: set[str] = set()
        self.evicted = 0
        self.prefill_batches = 0
        self.decode_batches = 0
        self.chunks = 0
        self.clipped = 0

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: BuildContext) -> SglangScheduler:
        return cls(options, ctx)

    # -- engine protocol -------------------------------------------------------
    def add(self, request: Request) -> None:
        """``handle_generate_request`` + ``init_req_max_new_tokens``: max_new_tokens
        capped by the request limit and by what an empty pool could hold."""
        prompt = request.prompt_tokens
        max_new = min(request.max_output_tokens, self.max_req_len - prompt - 1)
        paged = -(-prompt // self.page) * self.page
        max_new = min(max_new, self.capacity - paged - self.page - 1)  # max_new_tokens_for_memory
        if max_new < 1:
            self._reject(
                request,
                f"prompt of {prompt} tokens leaves no room for output "
                f"within the {self.max_req_len}-token request limit",
                key="prompt leaves no room for output within the request limit",
                figures={"prompt_tokens": prompt, "max_req_len": self.max_req_len},
            )
            return
        self.seq += 1
        key = self._key(request, max_new)
        req = Req(request, self.seq, max_new, key, self.page, self.clock.tick, self.clock.now_ms)
        if max_new < request.max_output_tokens:
            req.clipped = True
            self.clipped += 1
        self.waiting.append(req)

    def has_work(self) -> bool:
        return bool(
            self.waiting
            or self.running
            or self.chunked
            or self.rejected_now
            or (self.last_prefill and any(not r.finished for r in self.last_prefill))
        )

    def pop_outcomes(self) -> list[RequestOutcome]:
        out, self.outcomes = self.outcomes, []
        return out

    def kv_capacity_pages(self) -> int:
        return self.capacity // self.page

    def kv_used_pages(self) -> int:
        """Pages that cannot be reclaimed: request-held and locked cache (0 when idle)."""
        return (self.own_tokens + self.tree.protected_size) // self.page

    def decode_slots_per_tick(self) -> int:
        return self.max_running

    def prefix_hit_tokens(self) -> int:
        """Prompt tokens the radix cache supplied (a fleet's ``prefix_cache_hit_rate``)."""
        return self.total_hit

    def extra_summary(self) -> Mapping[str, Any]:
        seen = self.total_hit + self.total_extend
        out: dict[str, Any] = {
            "engine": "sglang",
            "schedule_policy": self.policy_name,
            "prefix_hit_tokens": self.total_hit,
            "prefill_computed_tokens": self.total_extend,
            "prefix_hit_rate": round(self.total_hit / seen, 6) if seen else 0.0,
            "retractions": self.retractions,
            "retracted_requests": len(self.retracted_ids),
            "evicted_tokens": self.evicted,
            "prefill_batches": self.prefill_batches,
            "decode_batches": self.decode_batches,
            "prefill_chunks": self.chunks,
            "max_new_tokens_clipped": self.clipped,
            "cached_tokens_at_end": self.tree.total_size,
            "final_new_token_ratio": round(self.ratio, 6),
        }
        if self.kv_capacity is not None:  # max_total_tokens: auto (reports without it unchanged)
            out["kv_capacity"] = self.kv_capacity
        return out

    # -- one step --------------------------------------------------------------
    def step(self, horizon: Horizon) -> TickRecord:
        tick = self.clock.tick
        rejected = tuple(self.rejected_now)
        self.rejected_now = []
        if self.chunked is not None:  # stash_chunked_request
            req = self.chunked
            self._checkpoint(req, req.extend_end)
            req.prefix_len = req.extend_end
        if self.last_prefill is not None:  # filter the last prefill batch, merge it
            kept = [r for r in self.last_prefill if not r.finished and r is not self.chunked]
            if len(kept) < len(self.last_prefill):
                self.batch_is_full = False
            if kept:
                if not self.running:
                    self.batch_is_full = False  # running_batch = last_batch (a fresh flag)
                self.running.extend(kept)
            self.last_prefill = None
        plan = self._get_new_batch_prefill()
        if plan is not None:
            return self._run_prefill(tick, plan, rejected)
        if self.running:
            return self._run_decode(tick, rejected)
        return self._run_idle(tick, rejected)

    def _get_new_batch_prefill(self) -> PrefillAdder | None:
        """``_get_new_batch_prefill_raw``: the adder of this step's prefill batch, or None."""
        running = self.running
        if not running:
            self.batch_is_full = False
        if (self.batch_is_full or not self.waiting) and self.chunked is None:
            return None
        rows = self.max_reqs - len(running) - (1 if self.chunked is not None else 0)
        if rows <= 0 and self.chunked is None:
            self.batch_is_full = True
            return None
        self.policy.calc_priority(self.waiting, self)
        adder = PrefillAdder(self, running)
        continuing = self.chunked
        if continuing is not None and not adder.add_chunked(continuing):
            self.chunked = None
        held = 1 if continuing is not None else 0
        for req in self.waiting:
            if adder.budget_state() == OTHER:
                break
            if len(adder.can_run) >= rows + held:
                self.batch_is_full = True
                break
            self.match(req)
            req.protected = req.prefix_len  # cache_protected_len
            # add_one_req hands ignore_eos requests to add_one_req_ignore_eos when the tree is disabled
            res = adder.add_one_ignore_eos(req) if self.ignore_eos and not self.radix else adder.add_one(req)
            if res != CONTINUE:
                if res == NO_TOKEN:
                    self.batch_is_full = bool(adder.can_run) or bool(running)
                break
        if not adder.can_run:
            return None
        if len(adder.can_run) > held:
            taken = {id(r) for r in adder.can_run}
            self.waiting = [r for r in self.waiting if id(r) not in taken]
        if adder.new_chunked is not None:
            self.chunked = adder.new_chunked
        return adder

    def _run_prefill(self, tick: int, adder: PrefillAdder, rejected: tuple[str, ...]) -> TickRecord:
        """``prepare_for_extend`` (allocation), the forward, ``process_batch_result_prefill``."""
        self.prefill_batches += 1
        batch = adder.can_run
        extend_total = sum(r.extend_end - r.prefix_len for r in batch)
        demand = extend_total if self.page == 1 else extend_total + len(batch) * self.page
        self._evict_for(demand)
        own_before = self.own_tokens
        admitted: list[list[Any]] = []
        continued: list[list[Any]] = []
        scheduled: dict[str, int] = {}
        hit = pairs = earlier = 0
        for req in batch:
            before, n = req.prefix_len, req.extend_end - req.prefix_len
            if req.pieces == 0:  # a new round: the matched prefix becomes this request's KV
                if req.admitted_tick is None:
                    req.admitted_tick = tick
                    req.admitted_ms = self.clock.now_ms
                admitted.append([req.rid, n, before, "resumed" if req.retractions else "new"])
                req.hit_tokens += before
                hit += before
                self.total_hit += before
            else:
                continued.append([req.rid, n, before])
            pairs += n * before + n * (n + 1) // 2
            earlier += before
            req.kv_len = req.extend_end
            req.pieces += 1
            self._set_own(req, req.kv_len)
            scheduled[req.rid] = n
            self.total_extend += n
        if self.available < 0:
            raise ReplayError(f"sglang: the prefill at step {tick} overflows the KV pool")
        free_after_sched = self.available
        grown = self.own_tokens - own_before
        prefill = extend_total
        duration: float | None
        if self.timing is not None and self.timing.prices_shape:
            duration = self.timing.price_step(prefill, 0, 0, len(batch), pairs, earlier)
        else:
            duration = self._duration(prefill, 0, 0)
        end_ms = self.clock.now_ms + duration if duration is not None else None
        completed: list[str] = []
        for req in batch:
            if req is self.chunked:
                continue  # its chunk is cached at the next step (stash_chunked_request)
            if req.pieces > 1:
                self.chunks += req.pieces
            req.pieces = 0
            req.out += 1
            if req.first_token_tick is None:
                req.first_token_tick = tick
                req.first_token_ms = end_ms
            if req.out >= req.max_new_tokens:
                completed.append(req.rid)
                self._finish(req, tick, end_ms)
            else:
                self._checkpoint(req, req.extend_end)
                req.prefix_len = req.extend_end
        self.last_prefill = batch
        active = len(self.running) + sum(1 for r in batch if not r.finished and r is not self.chunked)
        return self._prefill_record(
            tick,
            batch,
            admitted,
            continued,
            scheduled,
            hit,
            prefill,
            completed,
            free_after_sched,
            grown,
            active,
            duration,
            rejected,
        )

    # -- helpers ---------------------------------------------------------------
    def _duration(self, prefill: int, seqs: int, context: int) -> float | None:
        return self.timing.step_ms(prefill, seqs, context) if self.timing is not None else None

    def _finish(self, req: Req, tick: int, end_ms: float | None) -> None:
        """``release_kv_cache(checkpoint=True)``: prompt and output stay cached (all
        but the last sampled token, whose KV was never computed)."""
        req.finished = True
        self._release(req, checkpoint=True)
        self.outcomes.append(
            completed_outcome(
                req.request,
                arrival_tick=req.arrival_tick,
                admitted_tick=req.admitted_tick,
                first_token_tick=req.first_token_tick,
                finished_tick=tick,
                output_tokens=req.out,
                arrival_ms=req.arrival_ms if self.timing is not None else None,
                admitted_ms=req.admitted_ms if self.timing is not None else None,
                first_token_ms=req.first_token_ms,
                finished_ms=end_ms,
                preemptions=req.retractions,
                prefix_hit_tokens=req.hit_tokens,
                flags=("max_new_tokens_clipped",) if req.clipped else (),
            )
        )

    def _reject(self, request: Request, reason: str, *, key: str, figures: Mapping[str, int]) -> None:
        self.rejected_now.append(request.id)
        self.outcomes.append(
            rejected_outcome(request, reason, tick=self.clock.tick, key=key, figures=figures)
        )
