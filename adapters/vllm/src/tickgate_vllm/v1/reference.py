"""The reference step: vLLM's ``Scheduler.schedule()`` + ``update_from_output()``
as written, for any policy (priority runs it; fcfs runs :mod:`.fcfs`).

Mirrors ``vllm/v1/core/sched/scheduler.py``: ``schedule()``'s running pass
(tokens per request, ``KVCacheManager.allocate_slots()``, preemption of the
victim by ``_preempt_request()``), its waiting pass (``get_computed_blocks()``
in ``kv_cache_manager.py``, the ``scheduler_reserve_full_isl`` and
watermark checks, head-of-line blocking), ``_update_after_schedule()``, and
``update_from_output()`` with one sampled token per request whose prefill is
complete. :meth:`ReferenceStep._admission` and :meth:`ReferenceStep._admit`
are the waiting pass's checks and admission, shared with the fcfs step.
"""

from __future__ import annotations

import heapq
from typing import Any

from tickgate import TickRecord

from .request import RUNNING, RequestState
from .state import SchedulerState


class ReferenceStep(SchedulerState):
    """The two-pass step of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    def _full_step(self) -> TickRecord:
        """One step, any policy (the reference implementation; priority uses it)."""
        tick = self.clock.tick
        cfg = self.cfg
        bs = self.block_size
        pool = self.pool
        caching = self.prefix_caching
        maxlen = self.max_model_len
        running = self.running
        budget = cfg.max_num_batched_tokens
        n_waiting = self._n_waiting()
        thr = cfg.long_prefill_token_threshold if len(running) + n_waiting > 1 else 0
        sched: dict[RequestState, list[Any]] = {}  # req -> [tokens, kind, computed_before]
        preempted: list[RequestState] = []
        idx = 0
        while idx < len(running) and budget > 0:
            q = running[idx]
            n = q.num_tokens - q.num_computed_tokens
            if 0 < thr < n:
                n = thr
            if n > budget:
                n = budget
            if maxlen is not None and n > maxlen - q.num_computed_tokens - 1:
                n = maxlen - q.num_computed_tokens - 1
            if n <= 0:
                idx += 1
                continue
            slot = q.num_computed_tokens + n
            if maxlen is not None and slot > maxlen:
                slot = maxlen
            need, idx, back, _ = self._make_room(q, slot, idx, sched, preempted)
            budget += back
            if need < 0:
                if self.by_priority:
                    continue
                break
            if need > 0:
                self._grow(q, need)
            if caching:
                self._cache(q, min(q.num_computed_tokens + n, q.num_tokens) // bs)
            sched[q] = [n, "running", q.num_computed_tokens]
            budget -= n
            idx += 1

        admitted_blocks = 0
        if not preempted:
            while budget > 0:
                if self.by_priority:
                    if not self.waiting_heap:
                        break
                    q = self.waiting_heap[0]
                else:
                    if not self.waiting_fifo:
                        break
                    q = self.waiting_fifo[0]
                plan = self._admission(q, budget, thr)
                if plan is None:
                    break
                hits, n, new_blocks = plan
                if self.by_priority:
                    heapq.heappop(self.waiting_heap)
                else:
                    self.waiting_fifo.popleft()
                kind = "resumed" if q.num_preemptions > 0 else "transferred" if q.transferred else "new"
                before = self._admit(q, hits, n, new_blocks, tick)
                admitted_blocks += new_blocks
                q.num_computed_tokens = before
                sched[q] = [n, kind, before]
                budget -= n

        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        # _update_after_schedule, then the fake model output: one token for
        # every request whose prefill is complete.
        prefill_tokens = decode_tokens = context = total = 0
        decoded: list[str] = []
        sampled: list[RequestState] = []
        sched_json: list[list[Any]] = []
        admitted: list[str] = []
        pure_decode = not preempted
        for q, (n, kind, before) in sched.items():
            total += n
            context += before + n
            if kind == "running":
                sched_json.append([q.request.id, n, kind])
            else:
                # admissions carry their prefix hit: the tokens computed before, except a
                # transferred prompt's, whose local hit is its first-admission hit
                hit = before if kind != "transferred" else q.first_hit_tokens
                sched_json.append([q.request.id, n, kind, hit])
                admitted.append(q.request.id)
                pure_decode = False
            # As the reference harness counts: a chunk ending at the newest
            # sampled token decodes its last position; the rest is prefill
            # (prompt or recompute after preemption).
            if q.num_output_tokens > 0 and before + n == q.num_tokens:
                decode_tokens += 1
                if n != 1:
                    prefill_tokens += n - 1
                    pure_decode = False
            else:
                prefill_tokens += n
                pure_decode = False
            if n > 1 or kind != "running":
                self._chunk(before, n)
            q.num_computed_tokens = before + n
            if q.num_computed_tokens >= q.num_tokens:
                sampled.append(q)
                decoded.append(q.request.id)
        if len(sched) != len(running):
            pure_decode = False
        duration, end_ms = self._step_time(prefill_tokens, decode_tokens, context, (), tick)
        completed: list[str] = []
        finished: list[RequestState] = []
        for q in sampled:
            q.num_output_tokens += 1
            q.num_tokens += 1
            if q.first_token_tick is None:
                q.first_token_tick = tick
                q.first_token_ms = end_ms
            if q.num_output_tokens >= q.max_tokens or (maxlen is not None and q.num_tokens >= maxlen):
                finished.append(q)
                completed.append(q.request.id)
        if finished:
            pure_decode = False
            gone = set(finished)
            self.running = running = [q for q in running if q not in gone]
            for q in finished:
                self._release(q, finished=True)
                self.outcomes.append(self._outcome(q, tick, end_ms))
        rejected = tuple(self.rejected_now)
        self.rejected_now = []
        self.steady = pure_decode and not rejected
        self.total_preemptions += len(preempted)
        self._count_step(total, kv_after_sched)
        if self.observer is not None:
            self.observer(
                {
                    "step": tick,
                    "sched": [[q.request.id, e[0], e[1], e[2]] for q, e in sched.items()],
                    "num_tokens": total,
                    "preempted": [q.request.id for q in preempted],
                    "finished": completed,
                    "free_blocks_after_sched": free_after_sched,
                    "running_after_sched": len(running) + len(finished),
                    "free_blocks": pool.free,
                    "running": len(running),
                    "waiting": self._n_waiting(),
                }
            )
        body = (
            tuple(admitted),
            prefill_tokens,
            tuple(decoded),
            decode_tokens,
            self._n_waiting(),
            len(running) + len(finished),
            admitted_blocks,
            tuple(completed),
            tuple(q.request.id for q in preempted),
            rejected,
            sched_json,
        )
        if body != self.last_body:
            self.kv_sample = (kv_after_sched, free_after_sched)
            self.last_body = body
        record = TickRecord(
            tick=tick,
            admitted=body[0],
            prefill_tokens=prefill_tokens,
            decoded=body[2],
            decode_tokens=decode_tokens,
            queued=body[4],
            active=body[5],
            kv_pages_used=self.kv_sample[0],
            kv_pages_reserved=admitted_blocks,
            completed=body[7],
            preempted=body[8],
            rejected=rejected,
            duration_ms=duration,
            detail={"sched": sched_json, "free_blocks": self.kv_sample[1]},
        )
        self.last_record = record
        return record

    def _make_room(
        self,
        q: RequestState,
        slot: int,
        idx: int,
        sched: dict[RequestState, list[Any]],
        preempted: list[RequestState],
    ) -> tuple[int, int, int, int]:
        """The running pass's ``allocate_slots()`` retry: preempt victims (fcfs: the last
        running request; priority: the worst ``(priority, arrival)``, possibly one already
        scheduled this step) until the blocks for ``slot`` of ``q``'s tokens fit.

        Returns the blocks ``q`` still needs (-1: ``q`` preempted itself), ``idx`` moved for
        the victims taken from before it, and the tokens and count of the victims' entries
        removed from ``sched`` (the caller gives that budget back)."""
        running = self.running
        pool = self.pool
        bs = self.block_size
        back = back_count = 0
        while True:
            need = -(-slot // bs) - q.num_blocks
            if need <= pool.free:
                return need, idx, back, back_count
            if self.by_priority:
                victim = max(running, key=_victim_key)
                vi = running.index(victim)
                del running[vi]
                if vi < idx:
                    idx -= 1
                entry = sched.pop(victim, None)
                if entry is not None:
                    back += entry[0]
                    back_count += 1
            else:
                victim = running.pop()
            self._preempt(victim)
            preempted.append(victim)
            if victim is q:
                return -1, idx, back, back_count

    def _admission(self, q: RequestState, budget: int, thr: int) -> tuple[list[int], int, int] | None:
        """vLLM's checks for admitting waiting request ``q`` now: its cached
        blocks, the tokens it gets and the blocks it needs, or ``None`` if it
        has to wait (and with it everything behind it)."""
        cfg = self.cfg
        if len(self.running) >= cfg.max_num_seqs:
            return None
        bs = self.block_size
        pool = self.pool
        maxlen = self.max_model_len
        T = q.num_tokens
        hits = pool.lookup(q.prompt_keys, (T - 1) // bs, q.key) if self.prefix_caching else []
        h = len(hits)
        hit = h * bs
        if q.transferred:
            # its prompt KV arrived (add_transferred): vLLM's NIXL decode side loads
            # the prompt beyond the local hits into blocks allocated for the whole
            # prompt (get_num_new_matched_tokens, allocate_slots with
            # num_external_computed_tokens), then schedules the last prompt token
            # alone (num_computed_tokens = num_tokens - 1); the chunk is that token
            n = 1
            slot = T
        else:
            n = T - hit
            if 0 < thr < n:
                n = thr
            if not cfg.enable_chunked_prefill and n > budget:
                return None
            if n > budget:
                n = budget
            slot = hit + n
        wm = self.watermark_blocks if self.running else 0
        evictable = pool.evictable(hits) if h else 0
        if cfg.scheduler_reserve_full_isl:
            full = T if maxlen is None else min(T, maxlen)
            if max(-(-full // bs) - h, 0) + evictable + wm > pool.free:
                return None
        if maxlen is not None and slot > maxlen:
            slot = maxlen
        new_blocks = max(-(-slot // bs) - h, 0)
        if new_blocks + evictable + wm > pool.free:
            return None
        return hits, n, new_blocks

    def _admit(self, q: RequestState, hits: list[int], n: int, new_blocks: int, tick: int) -> int:
        """Admit ``q``, taken off its queue by the caller, for ``n`` tokens: its
        cached blocks and new ones (``hits`` becomes its block list), the blocks
        it completes registered, into the running queue, counted. Returns the
        tokens computed before this step's ``n`` (its prefix hit, or for a
        transferred prompt all but its last token); setting its computed tokens
        is the caller's."""
        bs = self.block_size
        h = len(hits)
        hit = h * bs
        T = q.num_tokens
        before = hit
        if q.transferred:
            # the transferred prompt is computed but its last token (vLLM's
            # _update_waiting_for_remote_kv); its local hits are prefix-cache hits,
            # the rest arrived by the transfer and is no hit
            before = T - 1
            q.transferred = False
            self.transferred_requests += 1
            self.transferred_tokens += T - hit
            self.transferred_hit_tokens += hit
        self._take_hits(q, hits, new_blocks)
        if self.prefix_caching:
            # a transferred prompt's blocks are registered under their hashes, as
            # _update_waiting_for_remote_kv's cache_blocks() (then the scheduled
            # token's allocate_slots) registers them
            # (tokens up to num_tokens, less the hash lookahead: v1.spec, eagle)
            self._cache(q, min(before + n, T - self.hash_lookahead) // bs)
        self.running.append(q)
        self.running_joins += 1
        q.running_seq = self.running_joins
        q.status = RUNNING
        self.total_admissions += 1
        self.total_hit_tokens += hit
        self.total_query_tokens += T
        if q.admitted_tick is None:
            q.admitted_tick = tick
            if self.timing is not None:
                q.admitted_ms = self.clock.now_ms
            q.first_hit_tokens = hit
            self.total_first_hit_tokens += hit
            self.total_first_query_tokens += T
        return before


def _victim_key(q: RequestState) -> tuple[int, int]:
    return (q.priority, q.ordinal)
