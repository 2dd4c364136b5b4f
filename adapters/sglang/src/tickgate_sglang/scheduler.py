"""The ``sglang`` scheduler: a step-for-step mirror of SGLang's scheduler loop.

One engine step is either a *prefill* (extend) batch or a *decode* batch, as
in SGLang's ``Scheduler.get_next_batch_to_run`` (mixed chunked prefill is not
mirrored):

1. Prefill. If a chunked request is in flight, or requests wait and fewer
   than ``max_running_requests`` run, the waiting queue is ordered by
   ``schedule_policy`` and walked by a ``PrefillAdder``
   (``schedule_policy.py``): the in-flight chunk goes first; then each request
   is matched against the radix cache and added while
   ``extend + min(max_new - out, 4096) < available + evictable - reserved``
   where ``reserved`` is the running requests' remaining output times
   ``new_token_ratio``. The first request that does not fit ends the walk
   (no skipping). ``max_prefill_tokens`` bounds a batch's input after its
   first request; a prompt larger than what is left of
   ``chunked_prefill_size`` is cut to a page-aligned chunk and continued in
   the next prefill. If the batch is not empty it runs: prompts are cached in
   the radix tree, requests whose prefill completed emit their first token.
2. Decode, otherwise. If the next token of every running request does not
   fit (after evicting unlocked cache) the batch *retracts* requests
   (``ScheduleBatch.retract_decode``): fewest output tokens first, longest
   prompt on ties, until ``20`` tokens per remaining request are free; they
   go back to the waiting queue and will be prefilled again (prompt plus the
   output so far). ``new_token_ratio`` is then re-estimated from the
   remaining batch, else it decays by ``new_token_ratio_decay`` per step down
   to ``min_new_token_ratio``; it is reset to its initial value when idle.

KV is counted in tokens, allocated in pages of ``page_size``: the pool holds
the radix tree (cached prefixes, evictable unless a running request locks
them) and each request's own uncached tokens.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Hashable, Mapping

from tickgate import (BuildContext, Horizon, InputError, ReplayError, Request, RequestOutcome, Scheduler,
                      TickRecord, completed_outcome, rejected_outcome)

from .options import (CLIP_MAX_NEW_TOKENS, DEFAULT_INIT_NEW_TOKEN_RATIO, DEFAULT_MIN_NEW_TOKEN_RATIO_FACTOR,
                      DEFAULT_NEW_TOKEN_RATIO_DECAY_STEPS, OPTIONS_SCHEMA, RETRACT_DECODE_STEPS, prefix_block_size,
                      resolve_max_total_tokens)
from .radix_cache import RadixCache, TreeNode
from .schedule_policy import make_policy


class _Req:
    """A request inside the mirror (SGLang's ``Req``)."""

    __slots__ = ("request", "seq", "max_new_tokens", "key", "weight", "decoded", "kv_len", "extend",
                 "last_node", "path_tokens", "prefix_tokens", "own", "retractions", "hit_tokens",
                 "arrival_tick", "arrival_ms", "admitted_tick", "admitted_ms", "first_token_tick",
                 "first_token_ms", "clipped", "chunk_target", "new_round", "pieces")

    def __init__(self, request: Request, seq: int, max_new: int, key: tuple[Hashable, ...], weight: int,
                 tick: int, now_ms: float) -> None:
        self.request = request
        self.seq = seq
        self.max_new_tokens = max_new
        self.key = key
        self.weight = weight
        self.decoded = 0
        self.kv_len = 0           # tokens whose KV is held
        self.extend = 0           # tokens this round's prefill computes
        self.last_node: TreeNode | None = None
        self.path_tokens = 0      # tokens of the locked tree path
        self.prefix_tokens = 0    # matched prefix for the next prefill
        self.own = 0              # pool tokens held outside the tree
        self.retractions = 0
        self.hit_tokens = 0
        self.arrival_tick = tick
        self.arrival_ms = now_ms
        self.admitted_tick: int | None = None
        self.admitted_ms: float | None = None  # when the step of its first admission started
        self.first_token_tick: int | None = None
        self.first_token_ms: float | None = None
        self.clipped = False
        self.chunk_target = 0     # fill length this prefill round must reach
        self.new_round = False    # admitted from the waiting queue by the current prefill
        self.pieces = 0           # prefill steps of the current round (chunks)

    @property
    def fill_len(self) -> int:
        """Tokens a (re)prefill must have in KV: the prompt plus the output so far
        (a retracted request recomputes its output, as SGLang's does)."""
        return self.request.prompt_tokens + self.decoded


class SglangScheduler(Scheduler):
    name = "sglang"
    description = ("SGLang mirror: radix prefix cache (LRU), lpm/dfs-weight/fcfs/lof/random, new-token-ratio "
                   "admission, decode retraction, chunked prefill.")
    options_schema = OPTIONS_SCHEMA
    uses_admission_policy = False
    admission_note = ("SGLang orders its waiting queue itself with schedule_policy "
                      "(lpm, dfs-weight, fcfs, lof, random)")
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
            raise InputError(None, f"max_total_tokens {total} holds fewer than two pages of {self.page}",
                             json_path="$.scheduler.options.max_total_tokens")
        self.max_running = options.get("max_running_requests", 4096)
        self.max_prefill = options.get("max_prefill_tokens", 16384)
        chunk = options.get("chunked_prefill_size", 8192)
        self.chunk_size: int | None = chunk if chunk > 0 else None
        if self.chunk_size is not None and self.chunk_size < self.page:
            raise InputError(None, f"chunked_prefill_size {chunk} is smaller than page_size {self.page}",
                             json_path="$.scheduler.options.chunked_prefill_size")
        context = options.get("context_length")
        self.max_req_len = min(context, total) - 1 if context else total - 1
        self.policy_name = options.get("schedule_policy", "fcfs")
        conservativeness = options.get("schedule_conservativeness", 1.0)
        self.init_ratio = options.get("init_new_token_ratio",
                                      min(DEFAULT_INIT_NEW_TOKEN_RATIO * conservativeness, 1.0))
        self.min_ratio = options.get("min_new_token_ratio",
                                     min(self.init_ratio * DEFAULT_MIN_NEW_TOKEN_RATIO_FACTOR, 1.0))
        if self.min_ratio > self.init_ratio:
            raise InputError(None, f"min_new_token_ratio {self.min_ratio} exceeds the initial ratio "
                             f"{self.init_ratio}", json_path="$.scheduler.options.min_new_token_ratio")
        steps = options.get("new_token_ratio_decay_steps", DEFAULT_NEW_TOKEN_RATIO_DECAY_STEPS)
        self.decay = (self.init_ratio - self.min_ratio) / steps
        self.clip = options.get("clip_max_new_tokens_estimation", CLIP_MAX_NEW_TOKENS)
        self.radix = not options.get("disable_radix_cache", False)
        self.block_size = prefix_block_size(options, ctx.prefix_block_size, self.page)
        #: what follows a block id in its pages' units (see _block_pages)
        self.block_tail = tuple(range(1, self.block_size // self.page))
        if not self.radix and self.policy_name in ("lpm", "dfs-weight"):
            self.policy_name = "fcfs"  # SGLang: cache-aware policies need the tree
        self.order = make_policy(self.policy_name, options.get("random_seed", 0))
        self.clock = ctx.clock
        self.timing = ctx.timing
        self.tree = RadixCache()
        self.ratio = self.init_ratio

        self.waiting: list[_Req] = []
        self.running: list[_Req] = []
        self.chunked: _Req | None = None
        self.own_tokens = 0
        self.seq = 0
        self.outcomes: list[RequestOutcome] = []
        self.rejected_now: list[str] = []
        self.sorted_at: tuple[int, int] | None = None  # (queue version, tree version) of the last sort
        self.queue_version = 0
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
    def build(cls, options: Mapping[str, Any], ctx: BuildContext) -> "SglangScheduler":
        return cls(options, ctx)

    # -- engine protocol -------------------------------------------------------
    def add(self, request: Request) -> None:
        limit = self.max_req_len - request.prompt_tokens - 1
        if limit < 1:
            self._reject(request, f"prompt of {request.prompt_tokens} tokens leaves no room for output "
                                  f"within the {self.max_req_len}-token request limit",
                         key="prompt leaves no room for output within the request limit",
                         figures={"prompt_tokens": request.prompt_tokens, "max_req_len": self.max_req_len})
            return
        key, weight = self._key(request)
        self.seq += 1
        req = _Req(request, self.seq, min(request.max_output_tokens, limit), key, weight,
                   self.clock.tick, self.clock.now_ms)
        if req.max_new_tokens < request.max_output_tokens:
            req.clipped = True
            self.clipped += 1
        self.waiting.append(req)
        self.queue_version += 1

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.chunked or self.rejected_now)

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

    # -- memory ----------------------------------------------------------------
    def _key(self, request: Request) -> tuple[tuple[Hashable, ...], int]:
        """Cacheable units of the prompt: token pages, or whole prefix blocks."""
        if not self.radix:
            return (), self.page
        if request.prompt_token_ids is not None:
            ids = request.prompt_token_ids[:request.prompt_tokens]
            p = self.page
            return tuple(tuple(ids[i:i + p]) for i in range(0, len(ids) - p + 1, p)), p
        if request.prefix_blocks is not None:
            full = request.prompt_tokens // self.block_size
            return self._block_pages(request.prefix_blocks[:full]), self.page
        return (), self.page

    def _block_pages(self, ids: tuple[Hashable, ...]) -> tuple[Hashable, ...]:
        """The radix units of the pages under workload block ids: a block of
        ``block_size`` tokens is ``block_size // page_size`` pages of that content,
        matched, cached and evicted page by page as SGLang does (whole blocks
        would cap a hit at a block boundary, and a 512-token id counted as one
        page under-counts hits 32x at page size 16). The first page of a block is
        its id, the others their offset in the block: two prefixes agree up to
        a page exactly when their ids agree up to its block (a unit is only ever
        compared with the unit at the same position, so an offset is compared
        with the same offset and an id with an id)."""
        tail = self.block_tail
        if not tail:
            return tuple(ids)
        return tuple(chain.from_iterable((bid, *tail) for bid in ids))

    @property
    def available(self) -> int:
        return self.capacity - self.tree.total_size - self.own_tokens

    def _pages(self, tokens: int) -> int:
        return -(-tokens // self.page) * self.page

    def _set_own(self, req: _Req) -> int:
        """Recompute a request's own tokens; returns the pool growth."""
        new = self._pages(req.kv_len) - req.path_tokens
        delta = new - req.own
        self.own_tokens += delta
        req.own = new
        return delta

    def _ensure(self, tokens: int) -> bool:
        """Make ``tokens`` free, evicting unlocked cache if needed."""
        short = tokens - self.available
        if short > 0:
            self.evicted += self.tree.evict(short)
        return self.available >= tokens

    def _match(self, req: _Req) -> None:
        """Refresh a waiting request's prefix match (at least one token is computed)."""
        if not req.key:
            req.prefix_tokens, req.last_node = 0, None
            return
        units = min(len(req.key), (req.fill_len - 1) // req.weight)
        tokens, node = self.tree.match_prefix(req.key[:units], req.weight)
        req.prefix_tokens, req.last_node = tokens, node

    def _cache(self, req: _Req) -> None:
        """Insert what the request has in KV into the tree and move its lock
        there (SGLang's ``cache_unfinished_req``)."""
        if not req.key:
            return
        units = min(len(req.key), req.kv_len // req.weight)
        if units * req.weight <= req.path_tokens:
            return
        _, node = self.tree.insert(req.key[:units], req.weight)
        self.tree.inc_lock_ref(node)
        if req.last_node is not None:
            self.tree.dec_lock_ref(req.last_node)
        req.last_node = node
        req.path_tokens = units * req.weight
        self._set_own(req)

    def _release(self, req: _Req) -> None:
        """Drop the request's lock and free its own tokens."""
        if req.last_node is not None:
            self.tree.dec_lock_ref(req.last_node)
            req.last_node = None
        req.path_tokens = 0
        self.own_tokens -= req.own
        req.own = 0

    # -- one step --------------------------------------------------------------
    def step(self, horizon: Horizon) -> TickRecord:
        tick = self.clock.tick
        rejected = tuple(self.rejected_now)
        self.rejected_now = []
        batch = self._prefill_batch(tick)
        if batch is not None:
            return self._run_prefill(tick, batch, rejected)
        if self.running:
            return self._run_decode(tick, rejected)
        if self.waiting or self.chunked:
            raise ReplayError(f"sglang: {len(self.waiting)} requests wait but none can be admitted into an "
                              f"empty engine of {self.capacity} tokens")
        self.ratio = self.init_ratio
        return TickRecord(tick=tick, rejected=rejected, duration_ms=self._duration(0, 0, 0))

    def _prefill_batch(self, tick: int) -> list[tuple[_Req, int]] | None:
        """SGLang's ``get_new_batch_prefill`` + ``PrefillAdder``; returns (request, prefix) pairs."""
        if self.chunked is None and (not self.waiting or len(self.running) >= self.max_running):
            return None
        offset = 0.0
        for r in self.running:
            offset += min(max(r.max_new_tokens - r.decoded, 0), self.clip) * self.ratio
        cur_offset = 0
        rem_input = self.max_prefill
        rem_chunk = self.chunk_size
        batch: list[tuple[_Req, int]] = []

        def rem_total() -> float:
            return self.available + self.tree.evictable_size - offset

        if self.chunked is not None:
            req = self.chunked
            remaining = req.chunk_target - req.kv_len
            extend = remaining if rem_chunk is None else min(remaining, rem_chunk)
            truncated = extend < remaining
            req.extend = extend
            batch.append((req, 0))
            paged = self._pages(extend)
            offset += paged + (0 if truncated else min(max(req.max_new_tokens - req.decoded, 0), self.clip))
            cur_offset += paged
            rem_input -= paged
            if rem_chunk is not None:
                rem_chunk -= paged

        if self.waiting and self._budget_ok(rem_total(), cur_offset, rem_input, rem_chunk):
            if self.sorted_at != (self.queue_version, self.tree.version) or self.policy_name == "random":
                self.order(self.waiting, self.tree, self._match)
                self.sorted_at = (self.queue_version, self.tree.version)
            new_chunk: _Req | None = None
            for req in self.waiting:
                if len(self.running) + len(batch) >= self.max_running:
                    break
                self._match(req)
                fill = req.fill_len
                extend = fill - req.prefix_tokens
                input_tokens = self._pages(extend)
                total = extend + min(max(req.max_new_tokens - req.decoded, 0), self.clip)
                if total >= rem_total():
                    break
                if input_tokens > rem_input and batch:
                    break
                locked = req.last_node is not None
                if locked:
                    self.tree.inc_lock_ref(req.last_node)  # type: ignore[arg-type]
                if total > rem_total():
                    if locked:
                        self.tree.dec_lock_ref(req.last_node)  # type: ignore[arg-type]
                    break
                if rem_chunk is None or input_tokens <= rem_chunk:
                    req.extend = extend
                    offset += input_tokens + min(max(req.max_new_tokens - req.decoded, 0), self.clip)
                else:
                    trunc = rem_chunk // self.page * self.page
                    if trunc <= 0:
                        if locked:
                            self.tree.dec_lock_ref(req.last_node)  # type: ignore[arg-type]
                        break
                    req.extend = trunc
                    input_tokens = trunc
                    offset += trunc
                    new_chunk = req
                cur_offset += input_tokens
                rem_input -= input_tokens
                if rem_chunk is not None:
                    rem_chunk -= input_tokens
                req.chunk_target = fill
                req.new_round = True
                req.path_tokens = req.prefix_tokens if locked else 0
                batch.append((req, req.prefix_tokens))
                if not self._budget_ok(rem_total(), cur_offset, rem_input, rem_chunk) or new_chunk:
                    break
            taken = {id(r) for r, _ in batch}
            if any(id(r) in taken for r in self.waiting):
                self.waiting = [r for r in self.waiting if id(r) not in taken]
                self.queue_version += 1
        return batch or None

    def _budget_ok(self, rem_total: float, cur_offset: int, rem_input: int, rem_chunk: int | None) -> bool:
        """SGLang's ``PrefillAdder.budget_state() == CONTINUE``."""
        cur_rem = self.available + self.tree.evictable_size - cur_offset
        if rem_total <= 0 or cur_rem <= 0:
            return False
        return rem_input > 0 and (rem_chunk is None or rem_chunk > 0)

    def _run_prefill(self, tick: int, batch: list[tuple[_Req, int]], rejected: tuple[str, ...]) -> TickRecord:
        self.prefill_batches += 1
        admitted: list[str] = []
        scheduled: dict[str, int] = {}
        hit = 0
        grown = 0
        pairs = earlier = 0  # the chunks' shape, for the timing model's price_step
        self.chunked = None
        for req, prefix in batch:
            if req.new_round:
                # a new round: the matched prefix becomes this request's KV
                req.new_round = False
                req.pieces = 0
                if req.admitted_tick is None:
                    req.admitted_tick = tick
                    req.admitted_ms = self.clock.now_ms
                admitted.append(req.request.id)
                req.kv_len = prefix
                req.hit_tokens += prefix
                hit += prefix
                self.total_hit += prefix
            need = self._pages(req.kv_len + req.extend) - req.path_tokens - req.own
            if not self._ensure(need):
                raise ReplayError(f"sglang: prefill of {req.request.id} needs {need} tokens; "
                                  f"{self.available} free after eviction")
            before, n = req.kv_len, req.extend
            pairs += n * before + n * (n + 1) // 2
            earlier += before
            req.kv_len += req.extend
            req.pieces += 1
            grown += self._set_own(req)
            scheduled[req.request.id] = req.extend
            self.total_extend += req.extend
        prefill = sum(scheduled.values())
        if self.timing is not None and self.timing.prices_shape:
            duration = self.timing.price_step(prefill, 0, 0, len(batch), pairs, earlier)
        else:
            duration = self._duration(prefill, 0, 0)
        end_ms = self.clock.now_ms + duration if duration is not None else None
        completed: list[str] = []
        chunk_id = None
        for req, _ in batch:
            self._cache(req)
            if req.kv_len < req.chunk_target:
                self.chunked = req
                chunk_id = req.request.id
                continue
            if req.pieces > 1:
                self.chunks += req.pieces
            req.decoded += 1
            if req.first_token_tick is None:
                req.first_token_tick = tick
                req.first_token_ms = end_ms
            if req.decoded >= req.max_new_tokens:
                completed.append(req.request.id)
                self._finish(req, tick, end_ms)
            else:
                self.running.append(req)
        detail: dict[str, Any] = {"batch": "prefill", "scheduled": scheduled, "prefix_hit_tokens": hit,
                                  "new_token_ratio": round(self.ratio, 6)}
        if chunk_id is not None:
            detail["chunked"] = chunk_id
        return TickRecord(
            tick=tick, admitted=tuple(admitted), prefill_tokens=prefill, queued=len(self.waiting),
            active=len(self.running) + len(completed) + (1 if self.chunked else 0),
            kv_pages_used=self._used_pages(), kv_pages_reserved=max(grown, 0) // self.page,
            completed=tuple(completed), rejected=rejected, duration_ms=duration, detail=detail,
        )

    def _run_decode(self, tick: int, rejected: tuple[str, ...]) -> TickRecord:
        self.decode_batches += 1
        retracted: list[str] = []
        need = self._decode_need(self.running)
        if not self._ensure(need):
            retracted = self._retract()
        else:
            self.ratio = max(self.ratio - self.decay, self.min_ratio)
        grown = 0
        context = 0
        for req in self.running:
            context += req.kv_len
            req.kv_len += 1
            grown += self._set_own(req)
            req.decoded += 1
        if self.available < 0:  # pragma: no cover - guarded by _retract
            raise ReplayError("sglang: decode overflowed the KV pool")
        decoding = [r.request.id for r in self.running]
        duration = self._duration(0, len(decoding), context)
        end_ms = self.clock.now_ms + duration if duration is not None else None
        completed: list[str] = []
        survivors: list[_Req] = []
        for req in self.running:
            if req.first_token_tick is None:  # pragma: no cover - prefill emits the first token
                req.first_token_tick, req.first_token_ms = tick, end_ms
            if req.decoded >= req.max_new_tokens:
                completed.append(req.request.id)
                self._finish(req, tick, end_ms)
            else:
                survivors.append(req)
        used = self._used_pages()
        self.running = survivors
        detail: dict[str, Any] = {"batch": "decode", "new_token_ratio": round(self.ratio, 6)}
        return TickRecord(
            tick=tick, decoded=tuple(decoding), decode_tokens=len(decoding), queued=len(self.waiting),
            active=len(survivors) + len(completed) + (1 if self.chunked else 0), kv_pages_used=used,
            kv_pages_reserved=max(grown, 0) // self.page, completed=tuple(completed),
            preempted=tuple(retracted), rejected=rejected, duration_ms=duration, detail=detail,
        )

    def _decode_need(self, reqs: list[_Req]) -> int:
        """Tokens the next decode allocates: one page per request at a page boundary."""
        if self.page == 1:
            return len(reqs)
        return sum(self.page for r in reqs if r.kv_len % self.page == 0)

    def _retract(self) -> list[str]:
        """SGLang's ``retract_decode``: free the requests with the least output
        (longest prompt on ties) until 20 tokens per remaining request are free."""
        order = sorted(self.running, key=lambda r: (r.decoded, -r.request.prompt_tokens, -r.seq), reverse=True)
        retracted: list[_Req] = []
        first = True
        while first or (self.available < RETRACT_DECODE_STEPS * len(order)
                        or self.available < self._decode_need(order)):
            if len(order) == 1:
                break
            first = False
            victim = order.pop()
            self._release(victim)
            victim.kv_len = 0
            victim.retractions += 1
            self.retractions += 1
            self.retracted_ids.add(victim.request.id)
            retracted.append(victim)
            residual = max(0, RETRACT_DECODE_STEPS * len(order) - self.available)
            if residual:
                self.evicted += self.tree.evict(residual)
        if not self._ensure(self._decode_need(order)):
            raise ReplayError("sglang: a single running request cannot decode; the KV pool is too small")
        keep = {id(r) for r in order}
        self.running = [r for r in self.running if id(r) in keep]
        total_decoded = sum(r.decoded for r in self.running)
        total_max = sum(r.max_new_tokens for r in self.running)
        self.ratio = min(1.0, (total_decoded + RETRACT_DECODE_STEPS * len(self.running)) / total_max)
        self.waiting.extend(retracted)
        self.queue_version += 1
        return [r.request.id for r in retracted]

    # -- helpers ---------------------------------------------------------------
    def _used_pages(self) -> int:
        return (self.tree.total_size + self.own_tokens) // self.page

    def _duration(self, prefill: int, seqs: int, context: int) -> float | None:
        return self.timing.step_ms(prefill, seqs, context) if self.timing is not None else None

    def _finish(self, req: _Req, tick: int, end_ms: float | None) -> None:
        """SGLang's ``cache_finished_req``: the prompt stays cached, the rest is freed."""
        self._cache(req)
        self._release(req)
        self.outcomes.append(completed_outcome(
            req.request, arrival_tick=req.arrival_tick, admitted_tick=req.admitted_tick,
            first_token_tick=req.first_token_tick, finished_tick=tick, output_tokens=req.decoded,
            arrival_ms=req.arrival_ms if self.timing is not None else None,
            admitted_ms=req.admitted_ms if self.timing is not None else None,
            first_token_ms=req.first_token_ms, finished_ms=end_ms, preemptions=req.retractions,
            prefix_hit_tokens=req.hit_tokens, flags=("max_new_tokens_clipped",) if req.clipped else (),
        ))

    def _reject(self, request: Request, reason: str, *, key: str, figures: Mapping[str, int]) -> None:
        self.rejected_now.append(request.id)
        self.outcomes.append(rejected_outcome(request, reason, tick=self.clock.tick, key=key, figures=figures))
