"""Fast-forwarding: runs of identical decode-only steps computed in one go.

No vLLM code does this: vLLM runs every step. A span is a run of steps that
``Scheduler.schedule()`` (``vllm/v1/core/sched/scheduler.py``) would decide
identically, each running request decoding one token, with the blocks
``KVCacheManager.allocate_slots()`` (``kv_cache_manager.py``) would allocate on
the way; it ends before the first arrival, last token, or allocation that does
not fit (docs/vllm.md, "Trace records and fast-forwarding"). The step that ends
a span because requests sample their last token has its own short path
(:meth:`Spans._finishing_decode_step`). The decode group (:mod:`.group`)
spans fcfs traffic in O(1) per span; these are the per-request spans.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tickgate import Horizon, PluginError, TickRecord, tick_record

from .request import RequestState
from .state import SchedulerState


class Spans(SchedulerState):
    """Decode-only spans of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    def _finishing_decode_step(self) -> TickRecord | None:
        """The step that ends a steady run because requests sample their last token.

        After a decode-only step (fcfs, nothing waiting or rejected since), every
        running request decodes one token again; if this step's new blocks fit
        (none is preempted), it is :meth:`_full_step_fcfs` with nothing to admit:
        each request is settled in running order (block, registration, sampled
        token), then the finished ones are released. ``None``: run the full step.
        """
        running = self.running
        bs = self.block_size
        maxlen = self.max_model_len
        a0 = 0
        for q in running:
            T = q.num_tokens
            if (
                q.num_computed_tokens + 1 != T
                or not q.num_output_tokens
                or (maxlen is not None and maxlen <= T)
            ):
                return None
            if q.num_blocks * bs < T:
                a0 += 1
        pool = self.pool
        if a0 > pool.free or not running or len(running) > self.cfg.max_num_batched_tokens:
            return None
        tick = self.clock.tick
        caching = self.prefix_caching
        decoded = []
        sched_json = []
        sj = []
        finished: list[RequestState] = []
        context = 0
        for q in running:
            T = q.num_tokens
            if q.num_blocks * bs < T:
                q.num_blocks += 1
                if caching:
                    pool.allocate(1, q.blocks)
                else:
                    pool.take(1)
                    if self.gpu_ids is not None:  # CPU KV offload: vLLM's block ids (v1.offload)
                        q.blocks.append(self.gpu_ids.pop())
            if caching and T // bs > q.num_cached_logical:
                self._cache(q, T // bs)
            q.num_computed_tokens = T
            context += T
            decoded.append(q.id)
            sched_json.append(q.decode_entry)
            sj.append(q.decode_entry_json)
            q.num_output_tokens = no = q.num_output_tokens + 1
            q.num_tokens = T = T + 1
            if no >= q.max_tokens or (maxlen is not None and maxlen <= T):
                finished.append(q)
        r = len(running)
        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        duration = self.timing.step_ms(0, r, context) if self.timing is not None else None
        end_ms = self.clock.now_ms + duration if duration is not None else None
        completed: list[str] = []
        if finished:
            gone = set(finished)
            self.running = [q for q in running if q not in gone]
            completed = self._finish(finished, tick, end_ms)
        self.steady = not finished
        self._count_step(r, kv_after_sched)
        if self.observer is not None:
            self._observe_step(tick, running, None, [], r, completed, free_after_sched)
        body = ((), 0, tuple(decoded), r, 0, r, 0, tuple(completed), (), (), sched_json)
        return self._record(tick, body, kv_after_sched, free_after_sched, 1, duration, sj)

    def _fresh_span(self, horizon: Horizon) -> TickRecord | None:
        """A span of decode-only steps starting now, after a step that was not one
        (it admitted, finished, prefilled...), when this step is decode-only too.

        Under fcfs with nothing waiting or rejected, a step in which every running
        request has its prompt done and decodes one token (``num_computed_tokens ==
        num_tokens - 1``, an output
        sampled), all within the budget, is decode-only unless a block allocation
        does not fit or a request finishes; :meth:`_steady_span` rules those out
        (it assumes nothing of the previous step but a blocked waiting head, and
        nothing waits). The record is the one :meth:`_full_step_fcfs` would build
        for this step (KV sampled after its allocations), spanning the whole run.
        """
        running = self.running
        if len(running) > self.cfg.max_num_batched_tokens:
            return None
        bs = self.block_size
        a0 = 0  # blocks allocated in this step
        decoded = []
        sched_json = []
        sj = []
        for q in running:
            T = q.num_tokens
            if q.num_computed_tokens + 1 != T or not q.num_output_tokens:
                return None
            if q.num_blocks * bs < T:
                a0 += 1
            decoded.append(q.id)
            sched_json.append(q.decode_entry)
            sj.append(q.decode_entry_json)
        pool = self.pool
        free0 = pool.free - a0
        kv0 = pool.usable - free0
        span = self._steady_span(horizon)
        if span <= 0:
            return None
        r = len(running)
        self.steady = True
        body = ((), 0, tuple(decoded), r, 0, r, 0, (), (), (), sched_json)
        return self._record(self.clock.tick, body, kv0, free0, span, self._span_duration, sj)

    def _steady_span(self, horizon: Horizon) -> int:
        """How many identical decode-only steps follow, and apply them.

        After a decode-only step with no arrival since, the next steps repeat
        it exactly until (a) a request samples its last token, (b) an arrival
        (the horizon), or (c) a block allocation does not fit (that step may
        preempt). The waiting head stays blocked: free blocks only shrink and
        its need only grows. Returns 0 when the next step must run in full.

        One pass over the running requests gathers what the span needs (steps
        to each one's last token, the step of its next block, its context), one
        more applies it: this runs once per record.
        """
        running = self.running
        bs = self.block_size
        maxlen = self.max_model_len
        limit = horizon.max_ticks if horizon.max_ticks is not None else 1 << 62
        if self.max_span is not None and self.max_span < limit:
            limit = self.max_span
        left_min = (1 << 62) + 1  # tokens until the first request samples its last one
        # first step (0-based) at which each request needs a new block: slot T+k > num_blocks*bs
        firsts = []
        context = 0
        for q in running:
            T = q.num_tokens
            left = q.max_tokens - q.num_output_tokens
            if maxlen is not None and maxlen - T < left:
                left = maxlen - T
            if left < left_min:
                left_min = left
            firsts.append(q.num_blocks * bs - T + 1)
            context += T
        last = left_min - 1  # the step sampling the last token is not steady
        if last < limit:
            limit = last
        if limit <= 0:
            return 0
        free = self.pool.free
        # no request takes more than a block per bs steps from its first one:
        # when even that fits, the exact count is not needed
        k_min = min(firsts) if firsts else 0
        if k_min < limit and len(firsts) * ((limit - 1 - k_min) // bs + 1) > free:
            limit = self._fitting_span(limit, firsts, free)
            if limit <= 0:
                return 0
        duration: float | None = None
        if self.timing is not None:
            limit, duration = self._timed_limit(limit, horizon.until_ms, len(running), context)
            if limit <= 0:
                return 0
        if self.observer is not None:
            self._observe_steady_span(limit, firsts)
        self._apply_span(limit, firsts)
        self._span_duration = duration
        # the next step samples somebody's last token: step() goes straight to
        # the finishing step instead of finding a span of 0 (nothing can change
        # in between but an arrival, and an arrival makes the next step full)
        self.finish_next = limit == last
        return limit

    def _fitting_span(self, limit: int, firsts: list[int], free: int) -> int:
        """The longest span up to ``limit`` steps whose block allocations fit in ``free``."""
        bs = self.block_size

        def allocs(n: int) -> int:
            total = 0
            for k0 in firsts:
                if n > k0:
                    total += (n - 1 - k0) // bs + 1
            return total

        return longest_fitting(limit, allocs, free)

    def _timed_limit(self, limit: int, until_ms: float | None, r: int, ctx0: int) -> tuple[int, float]:
        """Cut the span so every step starts before the next arrival; also the
        span's duration, summed exactly as the engine would step by step
        (:meth:`tickgate.TimingModel.decode_span`). ``r`` requests
        decode, with ``ctx0`` tokens of context in the first step."""
        timing = self.timing
        assert timing is not None
        now0 = self.clock.now_ms
        n, now = timing.decode_span(now0, r, ctx0, limit, until_ms)
        total = now - now0
        # make the engine's single addition land exactly where step-by-step would
        while now0 + total < now:
            total = _next_up(total)
        while now0 + total > now:
            total = _next_down(total)
        return n, total

    # self typed as the base: KvEventOps._apply_span_recording calls Spans._apply_span(self, ...)
    def _apply_span(self: SchedulerState, n: int, firsts: list[int]) -> None:
        """Advance every running request ``n`` decode steps, with the blocks they
        take on the way (request ``i`` first needs one at step ``firsts[i]``)."""
        bs = self.block_size
        pool = self.pool
        running = self.running
        # Steps before each block's allocation, summed: the span's steps hold
        # that many fewer blocks than its last one (for the KV mean).
        missing = 0
        if self.offload is not None:
            missing = self._apply_span_by_step(n, firsts)
        elif self.prefix_caching and all(
            q.num_preemptions == 0 and q.num_cached_blocks >= q.num_prompt_keys for q in running
        ):
            # Only blocks keyed to their own request get registered in the span
            # (deferred to release, see _cache), so the allocations can be one
            # pop of the free queue, dealt out in running order.
            takers: list[RequestState] = []
            grows: list[int] = []
            for q, k0 in zip(running, firsts):
                if n > k0:
                    g = (n - 1 - k0) // bs + 1
                    q.num_blocks += g
                    takers.append(q)
                    grows.append(g)
                    missing += g * k0 + bs * g * (g - 1) // 2
                nc = q.num_computed_tokens = q.num_computed_tokens + n
                q.num_output_tokens += n
                q.num_tokens += n
                if nc // bs > q.num_cached_logical:
                    q.num_cached_logical = nc // bs
            if takers:
                got: list[int] = []
                pool.allocate(sum(grows), got)
                if len(takers) == len(got):  # a block each
                    for q, b in zip(takers, got):
                        q.blocks.append(b)
                else:
                    pos = 0
                    for q, g in zip(takers, grows):
                        q.blocks += got[pos : pos + g]
                        pos += g
        else:
            caching = self.prefix_caching
            for q, k0 in zip(running, firsts):
                if n > k0:
                    g = (n - 1 - k0) // bs + 1
                    self._grow(q, g)
                    missing += g * k0 + bs * g * (g - 1) // 2
                q.num_computed_tokens += n
                q.num_output_tokens += n
                q.num_tokens += n
                if caching:
                    self._cache(q, q.num_computed_tokens // bs)
        used = pool.usable - pool.free
        self.total_steps += n
        r = len(running)
        self.total_sched_tokens += r * n
        self.tokens_hist[r] = self.tokens_hist.get(r, 0) + n
        # exact per-step KV after schedule(): blocks grow inside the span, the
        # last step holds the most
        if used > self.kv_peak:
            self.kv_peak = used
        self.kv_blocks_sum += used * n - missing

    def _apply_span_by_step(self, n: int, firsts: list[int]) -> int:
        """:meth:`_apply_span` with CPU KV offload: the blocks handed out step by step (each
        step's takers in running order), as vLLM allocates them, since block identities
        matter there (the connector's fences, vLLM's block ids); the other paths deal a
        request's blocks together. Returns the steps-before-allocation sum (``missing``)."""
        bs = self.block_size
        pool = self.pool
        caching = self.prefix_caching
        takers: list[RequestState] = []
        starts: list[int] = []
        total = missing = 0
        for q, k0 in zip(self.running, firsts):
            if n > k0:
                g = (n - 1 - k0) // bs + 1
                q.num_blocks += g
                takers.append(q)
                starts.append(k0)
                total += g
                missing += g * k0 + bs * g * (g - 1) // 2
        got: list[int] = []
        if caching:
            pool.allocate(total, got)
        else:
            pool.take(total)
            ids = self.gpu_ids
            if ids is not None:
                got = [ids.pop() for _ in range(total)]
        if got:
            _deal_by_step(takers, starts, n, bs, got)
        for q in self.running:
            q.num_computed_tokens += n
            q.num_output_tokens += n
            q.num_tokens += n
            if caching:
                self._cache(q, q.num_computed_tokens // bs)
        return missing


def _deal_by_step(takers: list[RequestState], starts: list[int], n: int, bs: int, got: list[int]) -> None:
    """Hand ``got`` (blocks in allocation order) to ``takers``, each taking one at step
    ``starts[i]`` and every ``bs`` steps after within ``n`` steps: step by step, each step's
    takers in running order."""
    order = sorted((k, i) for i, k0 in enumerate(starts) for k in range(k0, n, bs))
    for b, (_, i) in zip(got, order):
        takers[i].blocks.append(b)


def span_record(s: SchedulerState, span: int) -> TickRecord:
    """The last decode-only record, repeated ``span`` times from the current tick."""
    last = s.last_record
    if last is None:  # pragma: no cover - steady implies a previous record
        raise PluginError("vllm-v1: steady span without a previous step")
    return tick_record(
        # tick, admitted, prefill_tokens, decoded, decode_tokens, queued, active,
        s.clock.tick,
        (),
        0,
        last.decoded,
        last.decode_tokens,
        last.queued,
        last.active,
        # kv_pages_used, kv_pages_reserved, completed, preempted, rejected, span, duration_ms, detail
        last.kv_pages_used,
        0,
        (),
        (),
        (),
        span,
        s._span_duration,
        last.detail,
    )


def longest_fitting(limit: int, allocs: Callable[[int], int], free: int) -> int:
    """The most steps, up to ``limit``, whose block allocations ``allocs(steps)``
    (non-decreasing, 0 for 0 steps) fit in ``free`` blocks."""
    if allocs(limit) <= free:
        return limit
    lo, hi = 0, limit  # allocs(lo) <= free < allocs(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if allocs(mid) <= free:
            lo = mid
        else:
            hi = mid
    return lo


def _next_up(x: float) -> float:
    return math.nextafter(x, math.inf)


def _next_down(x: float) -> float:
    return math.nextafter(x, -math.inf)
