"""The waiting pass with CPU KV offload: ``Scheduler.schedule()``'s waiting loop
(``vllm/v1/core/sched/scheduler.py``) with vLLM's native ``OffloadingConnector``
(:mod:`.offload`). The step around it is the extended full step of
:mod:`.spec_step` (drafts or not); every step with ``kv_offload_cpu_blocks >
0`` takes it (no fast path).

What changes against the plain waiting pass, each where vLLM makes it:

- two queues: requests holding KV blocks (``kv_holding_waiting``: async loads)
  are drained before the waiting queue;
- a request whose load has not completed (``_handle_blocked_waiting_request``),
  or whose lookup the connector answers "later", is skipped, not blocking the
  requests behind it; skipped requests go back to the front of their queue in
  their order after the pass;
- a fresh admission offers its block-aligned GPU prefix hit to the connector
  (``get_num_new_matched_tokens``); a CPU hit allocates blocks for the hit only
  (no lookahead slots: ``limit_lookahead_tokens``), keeping ``reserved_blocks``
  free (``_inflight_prefill_reserved_blocks`` + ``_spec_decode_step_blocks``),
  issues the load (``update_state_after_alloc``) and parks the request in
  ``WAITING_FOR_REMOTE_KVS``, scheduling nothing;
- once the load is reported done, the pass reaching the request caches the
  loaded blocks (``_update_waiting_for_remote_kv``; a full hit leaves the last
  token to compute) and admits it as any request with computed tokens.
"""

from __future__ import annotations

import heapq
from typing import Any

from .request import PREEMPTED, RUNNING, WAITING, WAITING_FOR_KV, RequestState
from .spec import drafts_unused
from .state import SchedulerState


class OffloadStep(SchedulerState):
    """The offload waiting pass of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    def _offload_waiting_pass(
        self,
        tick: int,
        token_budget: int,
        input_budget: int,
        thr: int,
        sched: dict[RequestState, list[Any]],
        prefill_scheduled: bool,
        drafts_needed: bool,
    ) -> tuple[int, int, bool, int]:
        off = self.offload
        sp = self.step_spec
        ds = sp.draft_slots
        bs = self.block_size
        caching = self.prefix_caching
        pool = self.pool
        prio = self.by_priority
        assert off is not None  # the extended step passes here only with offload on
        holding = off.holding
        waiting: Any = self.waiting_heap if prio else self.waiting_fifo  # a heap or a deque, as holding
        running_scheduled = bool(sched)
        spec_step_blocks = -(-(1 + sp.k + sp.lookahead) // bs) if sp.k else 0
        admitted_blocks = 0
        skipped_holding: list[RequestState] = []
        skipped_waiting: list[RequestState] = []
        now_ms = self.clock.now_ms if self.timing is not None else None
        while token_budget > 0:
            queue = holding if holding else waiting
            if not queue or input_budget <= ds:
                break
            if len(self.running) >= self.cfg.max_num_seqs:
                break
            q = queue[0]
            if q.status == WAITING_FOR_KV:
                if q not in off.recv:
                    _pop(queue, prio)
                    skipped_holding.append(q)
                    continue
                off.recv.discard(q)
                # _update_waiting_for_remote_kv: the loaded blocks join the prefix cache
                if caching:
                    self._cache(q, min(q.num_computed_tokens, q.num_tokens - self.hash_lookahead) // bs)
                if q.num_computed_tokens == q.num_tokens:
                    q.num_computed_tokens -= 1
                q.status = PREEMPTED if q.num_preemptions else WAITING
            ext = 0
            load = False
            hits: list[int] | None = []
            if q.transferred:
                hits = None  # a prompt transferred by a remote prefill (add_transferred)
            elif q.num_computed_tokens == 0:
                hits = pool.lookup(q.prompt_keys, (q.num_tokens - 1) // bs, q.key) if caching else []
                if hits and sp.eagle_block_drop:
                    hits.pop()  # EAGLE recomputes the hit's last block (its drafter's hidden states)
                found, load = off.lookup(q, len(hits) * bs)
                if found is None:
                    _pop(queue, prio)
                    skipped_waiting.append(q)
                    continue
                ext = found
            reserved = (
                off.reserved_blocks(1 + sp.k + sp.lookahead if sp.k else 0, self.max_model_len)
                + spec_step_blocks
                if load
                else 0
            )
            plan = self._spec_admission(
                q,
                token_budget,
                input_budget,
                thr,
                not prefill_scheduled,
                running_scheduled,
                hits,
                ext,
                load,
                reserved,
            )
            if plan is None:
                break
            hits, n, new_blocks, pad = plan
            _pop(queue, prio)
            admitted_blocks += new_blocks
            if load:
                self._hold_for_load(q, hits, new_blocks, ext)
                off.after_alloc(q, ext, tick, now_ms)
                off.inflight.add(q)
                skipped_holding.append(q)
                continue
            kind = "resumed" if q.num_preemptions > 0 else "transferred" if q.transferred else "new"
            if q.num_blocks:
                before = self._admit_loaded(q, n, new_blocks, tick)
            else:
                before = self._admit(q, hits, n, new_blocks, tick)
            q.num_computed_tokens = before
            sched[q] = [n, kind, before, sp.k if pad else 0, pad]
            token_budget -= n
            input_budget -= n + ds
            drafts_needed = drafts_needed or not drafts_unused(q, before, n)
            if before + n < q.num_tokens:
                off.inflight.add(q)
        # re-queue the skipped requests ahead of the others, in their order
        if prio:
            for q in skipped_holding:
                heapq.heappush(holding, q)
            for q in skipped_waiting:
                heapq.heappush(waiting, q)
        else:
            holding.extendleft(reversed(skipped_holding))
            waiting.extendleft(reversed(skipped_waiting))
        return token_budget, input_budget, drafts_needed, admitted_blocks

    def _hold_for_load(self, q: RequestState, hits: list[int], new_blocks: int, ext: int) -> None:
        """Allocate ``q``'s blocks for its GPU hit and the ``ext`` tokens to load, without
        caching them (``allocate_slots(..., delay_cache_blocks=True)``); it waits for its KV."""
        local = len(hits) * self.block_size  # before _take_hits: hits becomes q's block list
        self._take_hits(q, hits, new_blocks)
        q.status = WAITING_FOR_KV
        q.num_computed_tokens = local + ext

    def _admit_loaded(self, q: RequestState, n: int, new_blocks: int, tick: int) -> int:
        """Admit ``q`` after its load, for ``n`` tokens: it holds its blocks already.
        Returns the tokens computed before (its GPU hit and the loaded ones)."""
        before = q.num_computed_tokens
        if new_blocks:
            self._grow(q, new_blocks)
        if self.prefix_caching:
            self._cache(q, min(before + n, q.num_tokens - self.hash_lookahead) // self.block_size)
        self.running.append(q)
        self.running_joins += 1
        q.running_seq = self.running_joins
        q.status = RUNNING
        assert self.offload is not None  # a load completed: offload is on
        r = self.offload.reqs[q]
        self.total_admissions += 1
        self.total_hit_tokens += r.local
        self.total_query_tokens += q.num_tokens
        if q.admitted_tick is None:
            q.admitted_tick = tick
            if self.timing is not None:
                q.admitted_ms = self.clock.now_ms
            q.first_hit_tokens = before
            self.total_first_hit_tokens += r.local
            self.total_first_query_tokens += q.num_tokens
            self.offload.first_cpu_hit_tokens += before - r.local
        return before

    def _offload_collect(self, tick: int, end_ms: float | None) -> dict[str, Any]:
        """The end of ``update_from_output``: the connector's completed jobs; the step's
        connector log, with the requests waiting for their KV (the harness's fields)."""
        off = self.offload
        assert off is not None  # called only with offload on
        off.collect(tick, end_ms)
        log: dict[str, Any] = off.take_log()
        waiting = sorted(q.id for q in off.holding if q.status == WAITING_FOR_KV)
        off.wait_steps += len(waiting)
        log["waiting_for_kv"] = waiting
        return log

    def _offload_idle_time(self) -> tuple[float, float]:
        """A timed step that schedules nothing: the engine waits for the next transfer
        to end (none limited by bandwidth: no time passes)."""
        now = self.clock.now_ms
        assert self.offload is not None  # called only with offload on
        due = self.offload.next_due_ms()
        duration = max(0.0, due - now) if due is not None else 0.0
        return duration, now + duration


def _pop(queue: Any, prio: bool) -> None:
    if prio:
        heapq.heappop(queue)
    else:
        queue.popleft()
