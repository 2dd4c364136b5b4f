"""The step with speculative decoding: vLLM 0.33's ``Scheduler.schedule()``,
``update_from_output()`` and ``update_draft_token_ids()``
(``vllm/v1/core/sched/scheduler.py``) with drafts, for any policy. Every step
with ``num_speculative_tokens > 0`` takes it (no fast path), and so does every
step with CPU KV offload (``kv_offload_cpu_blocks > 0``, drafts or not): its
waiting pass is then :mod:`.offload_step`'s, and the connector
(:mod:`.offload`) builds its jobs at the end of the schedule and collects
the finished ones after the update.

The reference step (:mod:`.reference`) with these changes, each where vLLM
makes it:

- running pass: a request asks for ``num_tokens_with_spec - num_computed_tokens``
  (1 + its drafts when it decodes), capped by ``long_prefill_token_threshold``,
  ``min(token_budget, input_budget - draft_slots)`` and ``max_model_len -
  num_computed_tokens - 1``; the drafts it gets are what is left after its
  verified tokens (``num_new_tokens + num_computed_tokens - num_tokens``), and
  the others are dropped (``request.spec_token_ids = []``); ``input_budget``
  loses ``num_new_tokens + draft_slots`` per request and the passes stop at
  ``input_budget <= draft_slots``;
- ``KVCacheManager.allocate_slots(..., num_lookahead_tokens)``: blocks for
  ``min(num_computed + num_new + lookahead, max_model_len)`` tokens, in both
  passes; only tokens up to ``num_tokens`` (less the hash lookahead) are
  cached;
- preemption as without drafts (never shrinking them); a priority victim
  already scheduled gives back its tokens, its draft slot and its drafts;
  ``_preempt_request`` clears the victim's drafts;
- waiting pass: ``pad_spec_decode`` (a one-token admission, next to a
  scheduled running request or after computed tokens, with no running prefill
  chunk, is padded to 1 + K with K ``-1`` drafts if it fits ``max_model_len``;
  if 1 + K exceeds the budget left, admission stops);
- ``update_from_output``: ``num_accepted = len(sampled) - 1``, the rejected
  drafts roll ``num_computed_tokens`` back, the tokens are appended one by one
  with ``check_stop`` (a stop trims the rest and their computed tokens), and
  the verified full blocks are cached at once (``cache_blocks(request,
  num_computed_tokens)``, because ``num_spec_tokens > 0``);
- ``update_draft_token_ids`` (``EngineCore.post_step``): every request
  scheduled in a step that schedules anything gets K drafts (none when
  ``SchedulerOutput.skip_drafts``, ``_drafts_unused`` for every scheduled
  request with eagle/draft_model), unless it finished or is a prefill chunk.
"""

from __future__ import annotations

import heapq
from typing import Any

from tickgate import TickRecord

from .request import RequestState
from .spec import drafts_unused
from .state import SchedulerState


class SpecStep(SchedulerState):
    """The speculative-decoding step of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    def _spec_step(self) -> TickRecord:
        tick = self.clock.tick
        cfg = self.cfg
        bs = self.block_size
        pool = self.pool
        caching = self.prefix_caching
        maxlen = self.max_model_len
        running = self.running
        sp = self.step_spec
        off = self.offload
        la = sp.lookahead
        ds = sp.draft_slots
        hl = sp.hash_lookahead
        held_drafts = sp.drafts
        chunking = sp.chunking
        token_budget = input_budget = cfg.max_num_batched_tokens
        thr = cfg.long_prefill_token_threshold if len(running) + self._n_waiting() > 1 else 0
        # req -> [tokens, kind, computed_before, scheduled drafts, padded]
        sched: dict[RequestState, list[Any]] = {}
        preempted: list[RequestState] = []
        drafts_needed = not sp.can_skip
        prefill_scheduled = False
        idx = 0
        while idx < len(running) and token_budget > 0:
            if input_budget <= ds:
                break
            q = running[idx]
            nc = q.num_computed_tokens
            T = q.num_tokens
            held = held_drafts.get(q, 0)
            n = T + held - nc
            if 0 < thr < n:
                n = thr
            n = min(n, token_budget, input_budget - ds)
            if maxlen is not None and n > maxlen - nc - 1:
                n = maxlen - nc - 1
            if n <= 0:
                idx += 1
                continue
            slot = nc + n + la
            if maxlen is not None and slot > maxlen:
                slot = maxlen
            first_victim = len(preempted)
            need, idx, back, back_count = self._make_room(q, slot, idx, sched, preempted)
            token_budget += back
            input_budget += back + back_count * ds
            for victim in preempted[first_victim:]:
                held_drafts.pop(victim, None)  # _preempt_request clears spec_token_ids
                if off is not None:
                    off.inflight.discard(victim)
            if need < 0:
                if self.by_priority:
                    continue
                break
            if need > 0:
                self._grow(q, need)
            if caching:
                self._cache(q, min(nc + n, T - hl) // bs)
            sd = 0
            if held:
                sd = min(held, nc + n - T) if nc + n > T else 0
                del held_drafts[q]
            sched[q] = [n, "running", nc, sd, False]
            token_budget -= n
            input_budget -= n + ds
            prefill_scheduled = prefill_scheduled or q in chunking
            drafts_needed = drafts_needed or not drafts_unused(q, nc, n)
            idx += 1

        admitted_blocks = 0
        if not preempted:
            waiting_pass = self._offload_waiting_pass if off is not None else self._spec_waiting_pass
            token_budget, input_budget, drafts_needed, admitted_blocks = waiting_pass(
                tick, token_budget, input_budget, thr, sched, prefill_scheduled, drafts_needed
            )

        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        if off is not None:  # the end of schedule(): build_connector_meta
            off.build_meta(sched, preempted, tick, self.clock.now_ms if self.timing is not None else None)
        skip = not drafts_needed
        prefill_tokens = decode_tokens = context = total = draft_tokens = 0
        decoded: list[str] = []
        sampled: list[RequestState] = []
        sched_json: list[list[Any]] = []
        admitted: list[str] = []
        for q, (n, kind, before, sd, _pad) in sched.items():
            total += n
            context += before + n
            if kind == "running":
                sched_json.append([q.request.id, n, kind])
            else:
                hit = before if kind != "transferred" else q.first_hit_tokens
                sched_json.append([q.request.id, n, kind, hit])
                admitted.append(q.request.id)
            # as the harness counts: the draft slots apart, a chunk ending at the
            # newest sampled token decodes its last position, the rest is prefill
            real = n - sd
            if q.num_output_tokens > 0 and before + real == q.num_tokens:
                decode_tokens += 1
                prefill_tokens += real - 1
            else:
                prefill_tokens += real
            draft_tokens += sd
            if n > 1 or kind != "running":
                self._chunk(before, n)
            q.num_computed_tokens = before + n
            if q.num_computed_tokens >= q.num_tokens:
                sampled.append(q)
                decoded.append(q.request.id)
                chunking.discard(q)
                if off is not None:
                    off.inflight.discard(q)  # _update_after_schedule: no longer a prefill chunk
            else:
                chunking.add(q)

        # update_from_output: verify, roll back, append with check_stop, cache
        spec_json: list[list[Any]] = []
        finished: list[RequestState] = []
        firsts: list[RequestState] = []
        completed: list[str] = []
        drafted_seqs = drafted_ctx = 0
        out_tokens = 0
        for q in sampled:
            _, _, _, sd, pad = sched[q]
            no = q.num_output_tokens
            acc = 0
            if sd:
                acc = 0 if pad else sp.num_accepted(q.request.id, no, sd)
                sp.verified(sd, acc, pad)
                spec_json.append([q.request.id, sd, acc, int(pad)])
                q.num_computed_tokens -= sd - acc
            gen = 1 + acc
            T = q.num_tokens
            room = q.max_tokens - no
            if maxlen is not None and maxlen - T < room:
                room = maxlen - T
            got = gen if gen < room else room
            q.num_output_tokens = no + got
            q.num_tokens = T + got
            out_tokens += got
            if got < gen or got == room:
                q.num_computed_tokens -= gen - got
                finished.append(q)
                completed.append(q.request.id)
            if q.first_token_tick is None:
                firsts.append(q)
            if caching:
                self._cache(q, q.num_computed_tokens // bs)
            drafted_seqs += 1
            drafted_ctx += q.num_tokens
        if not skip:
            sp.drafted = (drafted_seqs, drafted_ctx)
        else:
            sp.skip_steps += 1
        sp.steps += 1
        sp.output_tokens += out_tokens
        duration: float | None
        end_ms: float | None
        if off is not None and not total and self.timing is not None:
            duration, end_ms = self._offload_idle_time()
        else:
            duration, end_ms = self._step_time(
                prefill_tokens + draft_tokens, decode_tokens, context, firsts, tick
            )
        if finished:
            gone = set(finished)
            self.running = running = [q for q in running if q not in gone]
            for q in finished:
                chunking.discard(q)
                held_drafts.pop(q, None)
                if off is not None:  # _free_request: the connector's request_finished
                    off.request_finished(q)
                self._release(q, finished=True)
                self.outcomes.append(self._outcome(q, tick, end_ms))
        if total:
            # EngineCore.post_step -> update_draft_token_ids: K drafts (none if skip_drafts)
            k = 0 if skip else sp.k
            for q in sched:
                if (
                    q in chunking
                    or not k
                    or q.num_output_tokens >= q.max_tokens
                    or (maxlen is not None and q.num_tokens >= maxlen)
                ):
                    held_drafts.pop(q, None)
                else:
                    held_drafts[q] = k
        rejected = tuple(self.rejected_now)
        self.rejected_now = []
        self.steady = False
        self.total_preemptions += len(preempted)
        self._count_step(total, kv_after_sched)
        kv_log = self._offload_collect(tick, end_ms) if off is not None else None
        if self.observer is not None:
            line = {
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
            if self.spec is not None:
                line["spec"] = spec_json
                line["drafts"] = [[q.request.id, held_drafts[q]] for q in running if q in held_drafts]
                line["skip_drafts"] = skip
            if kv_log is not None:
                line.update(kv_log)
            self.observer(line)
        body: tuple[Any, ...] = (
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
        if self.spec is not None:
            body += (spec_json,)  # (without drafts: the other paths' body, whose KV sample it carries on)
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
            detail=(
                {"sched": sched_json, "spec": spec_json, "free_blocks": self.kv_sample[1]}
                if self.spec is not None
                else {"sched": sched_json, "free_blocks": self.kv_sample[1]}
            ),
        )
        self.last_record = record
        return record

    def _spec_waiting_pass(
        self,
        tick: int,
        token_budget: int,
        input_budget: int,
        thr: int,
        sched: dict[RequestState, list[Any]],
        prefill_scheduled: bool,
        drafts_needed: bool,
    ) -> tuple[int, int, bool, int]:
        """The waiting pass (one queue, strict head-of-line blocking); returns the budgets
        left, whether drafts are needed and the blocks the admissions took."""
        sp = self.step_spec
        ds = sp.draft_slots
        running_scheduled = bool(sched)
        admitted_blocks = 0
        while token_budget > 0:
            if self.by_priority:
                if not self.waiting_heap:
                    break
                q = self.waiting_heap[0]
            else:
                if not self.waiting_fifo:
                    break
                q = self.waiting_fifo[0]
            if input_budget <= ds:
                break
            plan = self._spec_admission(
                q, token_budget, input_budget, thr, not prefill_scheduled, running_scheduled
            )
            if plan is None:
                break
            hits, n, new_blocks, pad = plan
            if self.by_priority:
                heapq.heappop(self.waiting_heap)
            else:
                self.waiting_fifo.popleft()
            kind = "resumed" if q.num_preemptions > 0 else "transferred" if q.transferred else "new"
            before = self._admit(q, hits, n, new_blocks, tick)
            admitted_blocks += new_blocks
            q.num_computed_tokens = before
            sched[q] = [n, kind, before, sp.k if pad else 0, pad]
            token_budget -= n
            input_budget -= n + ds
            drafts_needed = drafts_needed or not drafts_unused(q, before, n)
        return token_budget, input_budget, drafts_needed, admitted_blocks

    def _spec_admission(
        self,
        q: RequestState,
        token_budget: int,
        input_budget: int,
        thr: int,
        no_chunk: bool,
        running_scheduled: bool,
        hits: list[int] | None = None,
        ext: int = 0,
        load: bool = False,
        reserved: int = 0,
    ) -> tuple[list[int], int, int, bool] | None:
        """:meth:`~.reference.ReferenceStep._admission` with drafts: the budget
        is ``min(token_budget, input_budget - draft_slots)``, a one-token admission
        may be padded to 1 + K (``no_chunk``: no running prefill chunk was scheduled,
        and ``running_scheduled``: a running request was, or the request has
        computed tokens), and the chunk's
        blocks include the lookahead slots. Returns the hits, the tokens, the new
        blocks and whether it is padded, or ``None`` (admission stops).

        With CPU KV offload (:mod:`.offload_step`) the caller passes the GPU
        ``hits`` it offered the connector and the ``ext`` tokens the connector
        answered: an asynchronous ``load`` schedules nothing and takes blocks for the
        hit only, keeping ``reserved`` blocks free; a request whose load is done holds
        its blocks already (``q.num_blocks``) and has its tokens computed."""
        cfg = self.cfg
        if len(self.running) >= cfg.max_num_seqs:
            return None
        sp = self.step_spec
        bs = self.block_size
        pool = self.pool
        maxlen = self.max_model_len
        budget = min(token_budget, input_budget - sp.draft_slots)
        T = q.num_tokens
        held = q.num_blocks
        if hits is None:
            hits = pool.lookup(q.prompt_keys, (T - 1) // bs, q.key) if self.prefix_caching else []
            computed = T - 1 if q.transferred else len(hits) * bs
        else:
            computed = q.num_computed_tokens if held else len(hits) * bs + ext
        h = len(hits)
        n = 0 if load else T - computed
        pad = False
        if n == 1 and no_chunk and (running_scheduled or computed > 0):
            padded = 1 + sp.k
            if maxlen is None or computed + padded + 1 <= maxlen:
                if padded > budget:
                    return None
                n = padded
                pad = True
        if not q.transferred and not load:
            if 0 < thr < n:
                n = thr
            if not cfg.enable_chunked_prefill and n > budget:
                return None
            if n > budget:
                n = budget
        wm = self.watermark_blocks if self.running else 0
        evictable = pool.evictable(hits) if h else 0
        if cfg.scheduler_reserve_full_isl:
            full = T if maxlen is None else min(T, maxlen)
            if max(-(-full // bs) - h - held, 0) + evictable + wm > pool.free:
                return None
        slot = computed + n + (0 if load else sp.lookahead)  # limit_lookahead_tokens
        if maxlen is not None and slot > maxlen:
            slot = maxlen
        new_blocks = max(-(-slot // bs) - h - held, 0)
        if new_blocks + evictable + wm > pool.free - reserved:
            return None
        return hits, n, new_blocks, pad
