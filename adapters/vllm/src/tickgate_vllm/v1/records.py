"""What a step hands back: its duration, its record, the outcomes of the requests
that finished or were rejected, and the per-step totals of the summary.

Mirrors the reporting half of ``Scheduler.update_from_output()`` in
``vllm/v1/core/sched/scheduler.py`` (a request that finished is freed,
``_free_request()``, and reported) and what vLLM's ``SchedulerStats`` /
prefill stats count; the record (``TickRecord``) and its pre-encoded
``detail`` are tickgate's own (docs/vllm.md, "Trace records"). The summary
built from the totals is :mod:`.summary`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tickgate import EncodedDetail, Request, RequestOutcome, TickRecord, tick_record

from .request import RequestState
from .state import SchedulerState

_LENGTH_CAPPED = ("length_capped",)
#: (chunks, attended pairs, earlier context, chunk tokens) of a step without prefill chunks
_NO_CHUNKS = (0, 0, 0, 0)


class Records(SchedulerState):
    """Records, outcomes and totals of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    def _step_time(
        self, prefill_tokens: int, decode_tokens: int, context: int, firsts: Iterable[RequestState], tick: int
    ) -> tuple[float | None, float | None]:
        """The step's duration and end (timed replays; ``None`` otherwise); the
        requests in ``firsts`` sampled their first token in it."""
        duration = None
        timing = self.timing
        if timing is not None:
            chunks, pairs, before, chunk_tokens = self.chunk_shape
            if chunks and self.priced_shape:
                # ``context`` counts every scheduled request's tokens after the
                # step, a chunk's p + c among them; the decoding sequences' share
                # is what the chunks (collected by _chunk) leave
                duration = timing.price_step(
                    prefill_tokens, decode_tokens, context - before - chunk_tokens, chunks, pairs, before
                )
            else:
                duration = timing.step_ms(prefill_tokens, decode_tokens, context)
            self.chunk_shape = _NO_CHUNKS
            if self.spec is not None:  # the drafter's pass after the step (v1.spec)
                duration += self.spec.drafter_ms(timing)
        end_ms = self.clock.now_ms + duration if duration is not None else None
        for q in firsts:
            q.first_token_tick = tick
            q.first_token_ms = end_ms
        return duration, end_ms

    def _chunk(self, before: int, n: int) -> None:
        """Count a prompt chunk of ``n`` tokens after ``before`` computed ones for
        the step's :meth:`~tickgate.interfaces.TimingModel.price_step`."""
        if not self.priced_shape:
            return
        chunks, pairs, ctx, tokens = self.chunk_shape
        self.chunk_shape = (chunks + 1, pairs + n * before + n * (n + 1) // 2, ctx + before, tokens + n)

    def _finish(self, finished: Iterable[RequestState], tick: int, end_ms: float | None) -> list[str]:
        """Release the requests that sampled their last token in this step, in
        order, with their outcomes; their ids."""
        completed = []
        off = self.offload
        for q in finished:
            completed.append(q.id)
            if off is not None:  # a fast path's finish: the connector's request_finished first
                off.request_finished(q)
            self._release(q, finished=True)
            self.outcomes.append(self._outcome(q, tick, end_ms))
        return completed

    def _count_step(self, tokens: int, kv_after_sched: int) -> None:
        """The summary's per-step figures: tokens scheduled, KV blocks after scheduling."""
        self.total_sched_tokens += tokens
        self.total_steps += 1
        hist = self.tokens_hist
        hist[tokens] = hist.get(tokens, 0) + 1
        if kv_after_sched > self.kv_peak:
            self.kv_peak = kv_after_sched
        self.kv_blocks_sum += kv_after_sched

    def _record(
        self,
        tick: int,
        body: tuple[Any, ...],
        kv_after_sched: int,
        free_after_sched: int,
        span: int,
        duration: float | None,
        sj: list[str],
    ) -> TickRecord:
        """The record of a step (or span) whose decisions are ``body``: admitted,
        prefill tokens, decoded, decode tokens, queued, active, blocks reserved,
        completed, preempted, rejected, sched entries. Its KV figures are sampled
        when the decisions change and carried over while they repeat (docs/vllm.md,
        "Trace records"); ``sj`` is the sched entries as JSON."""
        if body != self.last_body:
            self.kv_sample = (kv_after_sched, free_after_sched)
            self.last_body = body
        kv_used, free_blocks = self.kv_sample
        record = tick_record(
            # tick, admitted, prefill_tokens, decoded, decode_tokens, queued, active,
            tick,
            body[0],
            body[1],
            body[2],
            body[3],
            body[4],
            body[5],
            # kv_pages_used, kv_pages_reserved, completed, preempted, rejected, span, duration_ms, detail
            kv_used,
            body[6],
            body[7],
            body[8],
            body[9],
            span,
            duration,
            self._detail(body[10], sj, free_blocks),
        )
        self.last_record = record
        return record

    def _detail(self, sched_json: list[list[Any]], sj: list[str], free_blocks: int) -> Any:
        """The record's ``detail``, with its canonical JSON when every id is a str."""
        if self.plain_ids and type(free_blocks) is int:
            return EncodedDetail(
                {"sched": sched_json, "free_blocks": free_blocks},
                f'{{"free_blocks":{free_blocks},"sched":[{",".join(sj)}]}}',
            )
        return {"sched": sched_json, "free_blocks": free_blocks}

    def _reject(
        self, request: Request, arrival_ms: float | None, reason: str, *, key: str, figures: Mapping[str, int]
    ) -> None:
        """``reason`` quotes the request's numbers; ``key`` and ``figures`` are the same
        without them and the numbers themselves (what the report groups by)."""
        self.rejected_now.append(request.id)
        self.steady = False
        self.outcomes.append(
            RequestOutcome(
                id=request.id,
                status="rejected",
                reason=reason,
                arrival_tick=self.clock.tick,
                finished_tick=self.clock.tick,
                prompt_tokens=request.prompt_tokens,
                priority=request.priority,
                tenant=request.tenant,
                lane=request.lane,
                arrival_ms=arrival_ms,
                reason_key=key,
                reason_figures=tuple(figures.items()),
            )
        )

    def _outcome(self, q: RequestState, tick: int, end_ms: float | None) -> RequestOutcome:
        r = q.request
        missed = None
        if r.deadline_tick is not None:
            missed = tick + 1 > r.deadline_tick
        elif r.deadline_ms is not None and end_ms is not None:
            missed = end_ms > r.deadline_ms
        return RequestOutcome(  # positionally: one per request, and keywords cost twice as much
            # id, status, arrival_tick, reason, admitted_tick, first_token_tick, finished_tick,
            r.id,
            "completed",
            q.arrival_tick,
            None,
            q.admitted_tick,
            q.first_token_tick,
            tick,
            # output_tokens, prompt_tokens, preemptions, prefix_hit_tokens, priority, tenant, lane,
            q.num_output_tokens,
            r.prompt_tokens,
            q.num_preemptions,
            q.first_hit_tokens,
            r.priority,
            r.tenant,
            r.lane,
            # deadline_missed, arrival_ms, admitted_ms, first_token_ms, finished_ms, flags
            missed,
            q.arrival_ms,
            q.admitted_ms,
            q.first_token_ms,
            end_ms,
            _LENGTH_CAPPED if q.num_output_tokens < q.max_tokens else (),
        )

    def extra_summary(self) -> Mapping[str, Any]:
        from .summary import summary

        self._group_leave()

        return summary(self)
