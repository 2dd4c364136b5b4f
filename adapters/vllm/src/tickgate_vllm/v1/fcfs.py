"""The fcfs step in one pass per queue: the decisions of the reference step
(:mod:`.reference`), settled request by request.

Mirrors ``Scheduler.schedule()`` + ``update_from_output()`` of
``vllm/v1/core/sched/scheduler.py`` under ``policy: fcfs``: the victim of a
preemption is always the last of the running queue (``running.pop()``), not
yet visited, so nothing already scheduled in a step is ever un-scheduled and
each request's tokens, blocks and sampled token are final when it is visited.
The conformance fixtures run both this step and the reference one (through
the observer) against the recorded vLLM steps.
"""

from __future__ import annotations

from typing import Any

from tickgate import TickRecord

from .request import RequestState
from .state import SchedulerState


class FcfsStep(SchedulerState):
    """The single-pass fcfs step of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    def _full_step_fcfs(self) -> TickRecord:
        """:meth:`_full_step` for fcfs, in one pass per queue.

        Under fcfs nothing already scheduled in a step is ever un-scheduled (the
        victim is always the last of the running queue, not yet visited), so each
        request's schedule, computed tokens and sampled token are settled when it
        is visited; the decode-only request (one token, no new block, nothing to
        register) is the short path. Decisions are those of :meth:`_full_step`
        (the conformance fixtures run both policies through the observer).
        """
        tick = self.clock.tick
        cfg = self.cfg
        bs = self.block_size
        pool = self.pool
        caching = self.prefix_caching
        maxlen = self.max_model_len
        running = self.running
        budget = cfg.max_num_batched_tokens
        waiting = self.waiting_fifo
        thr = cfg.long_prefill_token_threshold if len(running) + len(waiting) > 1 else 0
        observer = self.observer
        obs: list[list[Any]] = []
        preempted: list[RequestState] = []
        sched_json: list[list[Any]] = []
        sj: list[str] = []  # sched_json's entries as JSON
        decoded: list[str] = []
        firsts: list[RequestState] = []
        finished: list[RequestState] = []
        prefill_tokens = decode_tokens = context = total = 0
        pure_decode = True
        nsched = 0
        idx = 0
        plain = maxlen is None and observer is None
        while idx < len(running) and budget > 0:
            q = running[idx]
            nc = q.num_computed_tokens
            T = q.num_tokens
            n = T - nc
            if n == 1 and plain and q.num_blocks * bs >= T and q.num_output_tokens:
                # the common case, short: it decodes one token in the blocks it holds
                if caching and T // bs > q.num_cached_logical:
                    self._cache(q, T // bs)
                q.num_computed_tokens = T
                budget -= 1
                total += 1
                context += T
                nsched += 1
                sched_json.append(q.decode_entry)
                sj.append(q.decode_entry_json)
                decode_tokens += 1
                decoded.append(q.id)
                q.num_output_tokens = no = q.num_output_tokens + 1
                q.num_tokens = T + 1
                if no >= q.max_tokens:
                    finished.append(q)
                idx += 1
                continue
            if n != 1:
                if 0 < thr < n:
                    n = thr
                if n > budget:
                    n = budget
            if maxlen is not None and n > maxlen - nc - 1:
                n = maxlen - nc - 1
            if n <= 0:
                idx += 1
                continue
            slot = nc + n
            if maxlen is not None and slot > maxlen:
                slot = maxlen
            if slot > q.num_blocks * bs:
                ok = True
                while True:
                    need = -(-slot // bs) - q.num_blocks
                    if need <= pool.free:
                        break
                    victim = running.pop()
                    self._preempt(victim)
                    preempted.append(victim)
                    if victim is q:
                        ok = False
                        break
                if not ok:
                    break
                if need > 0:
                    self._grow(q, need)
            nc += n
            if caching and (nc if nc < T else T) // bs > q.num_cached_logical:
                self._cache(q, (nc if nc < T else T) // bs)
            q.num_computed_tokens = nc
            budget -= n
            total += n
            context += nc
            nsched += 1
            if n == 1:
                sched_json.append(q.decode_entry)
                sj.append(q.decode_entry_json)
            else:
                sched_json.append([q.id, n, "running"])
                sj.append(f'[{q.id_json},{n},"running"]')
            if observer is not None:
                obs.append([q.id, n, "running", nc - n])
            if nc >= T:
                decoding, prefill = self._sample(q, n, decoded, firsts, finished)
                decode_tokens += decoding
                if prefill:
                    prefill_tokens += prefill
                    pure_decode = False
            else:
                prefill_tokens += n
                pure_decode = False
            if n > 1:
                self._chunk(nc - n, n)
            idx += 1

        admitted: list[str] = []
        admitted_blocks = 0
        if not preempted:
            budget, total, context, nsched, prefill_tokens, decode_tokens, admitted_blocks = self._admit_fcfs(
                tick,
                budget,
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
                finished,
                obs,
            )
            if admitted:
                pure_decode = False

        free_after_sched = pool.free
        kv_after_sched = pool.usable - free_after_sched
        if preempted or nsched != len(running):
            pure_decode = False
        duration, end_ms = self._step_time(prefill_tokens, decode_tokens, context, firsts, tick)
        completed: list[str] = []
        if finished:
            pure_decode = False
            gone = set(finished)
            self.running = running = [q for q in running if q not in gone]
            completed = self._finish(finished, tick, end_ms)
        rejected = tuple(self.rejected_now)
        if rejected:
            self.rejected_now = []
        self.steady = pure_decode and not rejected
        self.total_preemptions += len(preempted)
        self._count_step(total, kv_after_sched)
        n_waiting = len(waiting)
        if observer is not None:
            observer(
                {
                    "step": tick,
                    "sched": obs,
                    "num_tokens": total,
                    "preempted": [q.id for q in preempted],
                    "finished": completed,
                    "free_blocks_after_sched": free_after_sched,
                    "running_after_sched": len(running) + len(finished),
                    "free_blocks": pool.free,
                    "running": len(running),
                    "waiting": n_waiting,
                }
            )
        body = (
            tuple(admitted),
            prefill_tokens,
            tuple(decoded),
            decode_tokens,
            n_waiting,
            len(running) + len(finished),
            admitted_blocks,
            tuple(completed),
            tuple([q.id for q in preempted]) if preempted else (),
            rejected,
            sched_json,
        )
        return self._record(tick, body, kv_after_sched, free_after_sched, 1, duration, sj)

    def _admit_fcfs(
        self,
        tick: int,
        budget: int,
        thr: int,
        total: int,
        context: int,
        nsched: int,
        prefill_tokens: int,
        decode_tokens: int,
        sched_json: list[list[Any]],
        sj: list[str],
        decoded: list[str],
        admitted: list[str],
        firsts: list[RequestState],
        finished: list[RequestState],
        obs: list[list[Any]],
    ) -> tuple[int, int, int, int, int, int, int]:
        """The waiting pass of a fcfs step: admit from the head of the queue while
        the budget, ``max_num_seqs`` and the pool allow (head-of-line blocking).

        Appends to the step's lists; returns the step's running figures updated
        (budget left, tokens, context, scheduled, prefill and decode tokens) and
        the blocks admission allocated.
        """
        bs = self.block_size
        waiting = self.waiting_fifo
        observer = self.observer
        admitted_blocks = 0
        while budget > 0 and waiting:
            q = waiting[0]
            plan = self._admission(q, budget, thr)
            if plan is None:
                break
            hits, n, new_blocks = plan
            waiting.popleft()
            hit = len(hits) * bs  # before _admit: the list becomes its blocks
            kind = "resumed" if q.num_preemptions > 0 else "transferred" if q.transferred else "new"
            before = self._admit(q, hits, n, new_blocks, tick)  # the hit, or a transferred prompt's T - 1
            admitted_blocks += new_blocks
            T = q.num_tokens
            nc = q.num_computed_tokens = before + n
            sched_json.append([q.id, n, kind, hit])
            sj.append(f'[{q.id_json},{n},"{kind}",{hit}]')
            admitted.append(q.id)
            if observer is not None:
                obs.append([q.id, n, kind, before])
            budget -= n
            total += n
            context += nc
            nsched += 1
            self._chunk(before, n)
            if nc >= T:
                decoding, prefill = self._sample(q, n, decoded, firsts, finished)
                decode_tokens += decoding
                prefill_tokens += prefill
            else:
                prefill_tokens += n
        return budget, total, context, nsched, prefill_tokens, decode_tokens, admitted_blocks

    def _sample(
        self,
        q: RequestState,
        n: int,
        decoded: list[str],
        firsts: list[RequestState],
        finished: list[RequestState],
    ) -> tuple[int, int]:
        """``q``'s ``n`` tokens this step reach its newest token: it samples one
        (its first, or it finishes, go on those lists). Returns the step's decode
        and prefill tokens for it, as the reference harness counts them: a chunk
        ending at the newest sampled token decodes its last position, the rest
        is prefill."""
        no = q.num_output_tokens
        if no > 0:
            decoding, prefill = 1, n - 1
        else:
            decoding, prefill = 0, n
            firsts.append(q)
        decoded.append(q.id)
        q.num_output_tokens = no = no + 1
        q.num_tokens = T = q.num_tokens + 1
        if no >= q.max_tokens or (self.max_model_len is not None and self.max_model_len <= T):
            finished.append(q)
        return decoding, prefill
