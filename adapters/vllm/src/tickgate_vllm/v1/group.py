"""The decode group: fcfs steps and spans that cost their events, not their
running requests.

No vLLM code does this: it computes what ``Scheduler.schedule()`` +
``update_from_output()`` (``vllm/v1/core/sched/scheduler.py``) decide while every
running request is a plain decoder, with the blocks
``KVCacheManager.allocate_slots()`` (``kv_cache_manager.py``) pops for them,
without visiting each request (docs/vllm.md, "Speed").

Under fcfs, most steps decode every running request one token; a step then
changes each one's fields the same way (one more token, one more block every
``block_size`` steps, at a phase of its own). While every running request is
such a plain decoder (:meth:`DecodeGroup._plain`), they form a group: their
fields stay as they were at the decode clock ``D`` (``decode_clock``) when they
joined (``RequestState.group_clock``), and a step or span moves the clock
instead of visiting each of them. What a span needs of them is kept as
aggregates: members per allocation phase (``phase_members``: how many blocks
n steps take, one slice sum), a heap of the steps at which they sample their
last token (``last_tokens``), their context (``group_context``). Blocks the
members take are popped from the pool when vLLM pops them (free counts and
evictions stay exact) and dealt out (from ``undealt_blocks``) when a member's
fields are next needed (:meth:`DecodeGroup._sync`); a block is only a label
once popped, so which member gets which one changes nothing. So a record costs
its events (arrivals, completions, allocations as counts), not its running
requests. Anything else (a request in prefill, a resumed request, which
registers its own blocks as it goes, a preemption, priority) brings every
member up to date and runs the step in full. With an observer attached, a span
or step hands it the line of every step it covers (:mod:`.observe`).
"""

from __future__ import annotations

import heapq
from itertools import chain
from typing import Any

from tickgate import Horizon, PluginError, TickRecord

from .request import RequestState
from .spans import longest_fitting, span_record
from .state import SchedulerState


class DecodeGroup(SchedulerState):
    """The decode group of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    def _plain(self, q: RequestState) -> bool:
        """``q`` decodes one token per step in blocks allocated on demand, and
        registers nothing in the prefix cache while it runs (see :meth:`_cache`)."""
        T = q.num_tokens
        return (
            q.num_computed_tokens + 1 == T
            and q.num_output_tokens > 0
            and 0 <= q.num_blocks * self.block_size - T + 1 < self.block_size
            and not (self.prefix_caching and (q.num_preemptions or q.num_cached_blocks < q.num_prompt_keys))
        )

    def _left(self, q: RequestState) -> int:
        """Steps before the one in which ``q`` samples its last token (``max_tokens``
        or ``max_model_len``)."""
        left = q.max_tokens - 1 - q.num_output_tokens
        if self.max_model_len is not None and self.max_model_len - 1 - q.num_tokens < left:
            left = self.max_model_len - 1 - q.num_tokens
        return left

    def _group_enter(self) -> bool:
        """Form the decode group from the running queue, if every request is plain."""
        running = self.running
        blocker = self.group_blocker
        if blocker is not None:
            if blocker in running and not self._plain(blocker):
                return False
            self.group_blocker = None
        plain = self._plain
        for q in running:
            if not plain(q):
                self.group_blocker = q
                return False
        D = self.decode_clock
        bs = self.block_size
        phase = self.phase_members
        fin = []
        ctx = 0
        for q in running:
            T = q.num_tokens
            q.group_clock = D
            ph = q.group_phase = (D + q.num_blocks * bs - T + 1) % bs
            phase[ph] += 1
            phase[ph + bs] += 1
            fin.append((D + self._left(q), q.running_seq, q))
            ctx += T
        heapq.heapify(fin)
        self.last_tokens = fin
        self.group_context = ctx
        self.grouped = True
        self.members_view = None
        return True

    def _join(self, q: RequestState) -> None:
        """Add a plain running request to the group (its fields hold at ``D``)."""
        bs = self.block_size
        D = self.decode_clock
        T = q.num_tokens
        q.group_clock = D
        ph = q.group_phase = (D + q.num_blocks * bs - T + 1) % bs
        self.phase_members[ph] += 1
        self.phase_members[ph + bs] += 1
        heapq.heappush(self.last_tokens, (D + self._left(q), q.running_seq, q))
        self.group_context += T

    def _sync(self, q: RequestState) -> None:
        """Bring member ``q``'s fields to the decode clock: its tokens, the blocks
        it took on the way (dealt from ``undealt_blocks``), its logical cache mark."""
        D = self.decode_clock
        k = D - q.group_clock
        if k:
            bs = self.block_size
            T = q.num_tokens
            x0 = q.group_clock + q.num_blocks * bs - T + 1  # the step it took its next block in
            if x0 < D:
                g = (D - 1 - x0) // bs + 1
                q.num_blocks += g
                # the KV mean counted these blocks from the end of their record on
                # (see _group_span); from the step that took each, it should
                self.kv_blocks_sum -= g * x0 + bs * g * (g - 1) // 2
                if self.prefix_caching:
                    pending = self.undealt_blocks
                    q.blocks += pending[-g:]
                    del pending[-g:]
            q.num_tokens = T + k
            q.num_output_tokens += k
            nc = q.num_computed_tokens = q.num_computed_tokens + k
            if self.prefix_caching and nc // bs > q.num_cached_logical:
                q.num_cached_logical = nc // bs
            q.group_clock = D

    def _group_leave(self) -> None:
        """Bring every member up to date and dissolve the group."""
        if not self.grouped:
            return
        for q in self.running:
            self._sync(q)
        if self.undealt_blocks:  # pragma: no cover - every popped block belongs to a member
            raise PluginError(
                f"vllm-v1: {len(self.undealt_blocks)} blocks taken by the decode group were not dealt out"
            )
        self.phase_members = [0] * (2 * self.block_size)
        self.last_tokens = []
        self.group_context = 0
        self.grouped = False

    def _members(self) -> tuple[tuple[str, ...], list[Any], list[str]]:
        """The members' ids, sched entries and their JSON, in running order (kept
        until the running queue changes)."""
        view = self.members_view
        if view is None:
            running = self.running
            view = self.members_view = (
                tuple([q.id for q in running]),
                [q.decode_entry for q in running],
                [q.decode_entry_json for q in running],
            )
        return view

    def _group_allocs(self, n: int) -> int:
        """Blocks the members take in the next ``n`` steps."""
        bs = self.block_size
        rounds, rest = divmod(n, bs)
        total = len(self.running) * rounds
        if rest:
            start = self.decode_clock % bs
            total += sum(self.phase_members[start : start + rest])
        return total

    def _take(self, n: int) -> None:
        """Pop ``n`` blocks from the pool for the members."""
        if self.prefix_caching:
            self.pool.allocate(n, self.undealt_blocks)
        else:
            self.pool.take(n)

    def _group_span(self, horizon: Horizon) -> TickRecord | None:
        """:meth:`_fresh_span` / :meth:`_steady_span` for the group: the identical
        decode-only steps up to the first last token, the horizon, or the first
        step whose blocks do not fit; ``None`` when there are none."""
        fin = self.last_tokens
        if not fin:
            return None
        r = len(self.running)
        if r > self.cfg.max_num_batched_tokens:
            return None
        D = self.decode_clock
        last = fin[0][0] - D  # the step sampling somebody's last token is not steady
        limit = horizon.max_ticks if horizon.max_ticks is not None else 1 << 62
        if self.max_span is not None and self.max_span < limit:
            limit = self.max_span
        if last < limit:
            limit = last
        if limit <= 0:
            return None
        pool = self.pool
        free = pool.free
        allocs = self._group_allocs
        if allocs(limit) > free:
            limit = longest_fitting(limit, allocs, free)
            if limit <= 0:
                return None
        duration: float | None = None
        if self.timing is not None:
            limit, duration = self._timed_limit(limit, horizon.until_ms, r, self.group_context)
            if limit <= 0:
                return None
        n = limit
        if self.observer is not None:
            self._observe_group_span(n)
        # taken by the first step (its record samples the KV after them)
        a0 = self.phase_members[D % self.block_size]
        taken = allocs(n)
        used = pool.usable - free
        if taken:
            self._take(taken)
        # each step's KV after scheduling: used before the span plus the blocks
        # taken so far; counted here as if taken at the start of the step after
        # the span, corrected per block by _sync
        self.kv_blocks_sum += used * n + taken * (D + n)
        self.decode_clock = D + n
        self.group_context += r * n
        self.total_steps += n
        self.total_sched_tokens += r * n
        self.tokens_hist[r] = self.tokens_hist.get(r, 0) + n
        if used + taken > self.kv_peak:
            self.kv_peak = used + taken
        self._span_duration = duration
        self.finish_next = n == last
        if self.steady:
            return span_record(self, n)
        self.steady = True
        decoded_t, sched_json, sj = self._members()
        free0 = free - a0
        body = ((), 0, decoded_t, r, 0, r, 0, (), (), (), sched_json)
        return self._record(self.clock.tick, body, pool.usable - free0, free0, n, duration, sj)

    def _group_step(self) -> TickRecord | None:
        """:meth:`_full_step_fcfs` when every running request is a member: they
        all decode one token (their blocks fit: nobody is preempted), the ones
        at their last token finish, and the waiting queue is served as usual.
        ``None`` when this step's blocks do not fit."""
        running = self.running
        r = len(running)
        cfg = self.cfg
        budget = cfg.max_num_batched_tokens
        if r > budget:
            return None
        pool = self.pool
        D = self.decode_clock
        a0 = self.phase_members[D % self.block_size]
        if a0 > pool.free:
            return None
        tick = self.clock.tick
        waiting = self.waiting_fifo
        thr = cfg.long_prefill_token_threshold if r + len(waiting) > 1 else 0
        if a0:
            self._take(a0)
        self.decode_clock = D + 1
        context = self.group_context
        self.group_context = context + r
        fin = self.last_tokens
        finished: list[RequestState] = []
        while fin and fin[0][0] == D:  # in running_seq order: running order
            finished.append(heapq.heappop(fin)[2])
        decoded_t, sched_json, sj = self._members()
        admitted: list[str] = []
        newly: list[RequestState] = []  # admitted and finished in this step
        firsts: list[RequestState] = []
        total = nsched = decode_tokens = r
        prefill_tokens = admitted_blocks = 0
        if waiting:
            sched_json = list(sched_json)
            sj = list(sj)
            decoded = list(decoded_t)
            obs: list[list[Any]] = []  # the admissions' observer entries (with an observer)
            budget, total, context, nsched, prefill_tokens, decode_tokens, admitted_blocks = self._admit_fcfs(
                tick,
                budget - r,
                thr,
                total,
                context,
                nsched,
                prefill_tokens,
                decode_tokens,
                sched_json,
                sj,
                decoded,
                admitted,
                firsts,
                newly,
                obs,
            )
            if admitted:
                decoded_t = tuple(decoded)
        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        duration, end_ms = self._step_time(prefill_tokens, decode_tokens, context, firsts, tick)
        leave = False
        if admitted:
            self.members_view = None
            D1 = self.decode_clock
            for q in running[r:]:
                q.group_clock = D1  # its fields are current
                if q in newly:
                    continue
                if self._plain(q):
                    self._join(q)
                else:
                    leave = True
        completed: list[str] = []
        if finished or newly:
            self.members_view = None
            gone = set(finished)
            gone.update(newly)
            self.running = [q for q in running if q not in gone]
            bs = self.block_size
            phase = self.phase_members
            for q in finished:
                self._sync(q)
                phase[q.group_phase] -= 1
                phase[q.group_phase + bs] -= 1
                self.group_context -= q.num_tokens
            completed = self._finish(chain(finished, newly), tick, end_ms)
        rejected = tuple(self.rejected_now)
        if rejected:
            self.rejected_now = []
        self.steady = not (admitted or completed or rejected)
        self._count_step(total, kv_after_sched)
        # _sync takes each member block's step (D) off the KV sum, counting it
        # from that step on; its share of this step was counted just above
        self.kv_blocks_sum += a0 * D
        body = (
            tuple(admitted),
            prefill_tokens,
            decoded_t,
            decode_tokens,
            len(waiting),
            r + len(admitted),
            admitted_blocks,
            tuple(completed),
            (),
            rejected,
            sched_json,
        )
        record = self._record(tick, body, kv_after_sched, free_after_sched, 1, duration, sj)
        if self.observer is not None:
            self._observe_step(tick, running, D, obs if admitted else [], total, completed, free_after_sched)
        if leave:
            self._group_leave()
        return record
