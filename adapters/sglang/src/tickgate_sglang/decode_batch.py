"""The decode round of the ``sglang`` mirror: SGLang's ``Scheduler.update_running_batch``
(``python/sglang/srt/managers/scheduler.py``) with ``ScheduleBatch.check_decode_mem`` and
``ScheduleBatch.retract_decode`` (``schedule_batch.py``): grow every running request by one token,
retract requests when the pool cannot hold the round, or step idle."""

from __future__ import annotations

from tickgate import (
    ReplayError,
    TickRecord,
)

from .request_state import Req
from .scheduler_state import SchedulerState


class DecodeBatch(SchedulerState):
    """The decode round of :class:`~.scheduler.SglangScheduler` (a mixin): ``update_running_batch``
    with ``ScheduleBatch.check_decode_mem`` and ``retract_decode``, and the idle step."""

    def _decode_need(self, reqs: list[Req]) -> int:
        """``new_tokens_required_next_decode``: a page for each request at a page boundary."""
        if self.page == 1:
            return len(reqs)
        return sum(self.page for r in reqs if r.kv_len % self.page == 0)

    def _check_decode_mem(self, reqs: list[Req]) -> bool:
        """``check_decode_mem`` → ``check_decode_capacity``: evict the shortfall, then compare."""
        need = self._decode_need(reqs)
        self._evict_for(need)
        return self.available >= need

    def _run_decode(self, tick: int, rejected: tuple[str, ...]) -> TickRecord:
        """``update_running_batch`` + ``prepare_for_decode``, the forward, ``process_batch_result_decode``."""
        self.decode_batches += 1
        retracted: list[str] = []
        if not self._check_decode_mem(self.running):
            retracted = self._retract()
            self.batch_is_full = False
        else:
            self.ratio = max(self.ratio - self.decay, self.min_ratio)
        # alloc_for_decode: paged allocation evicts for a page per request (allocation.py,
        # alloc_paged_token_slots_decode), token allocation for a token per request
        self._evict_for(len(self.running) * self.page)
        context = 0
        own_before = self.own_tokens
        for req in self.running:
            context += req.kv_len
            req.kv_len += 1
            self._set_own(req, req.kv_len)
        if self.available < 0:
            raise ReplayError(f"sglang: the decode at step {tick} overflows the KV pool")
        free_after_sched = self.available
        grown = self.own_tokens - own_before
        decoding = [r.rid for r in self.running]
        duration = self._duration(0, len(decoding), context)
        end_ms = self.clock.now_ms + duration if duration is not None else None
        completed: list[str] = []
        survivors: list[Req] = []
        for req in self.running:
            req.out += 1
            if req.out >= req.max_new_tokens:
                completed.append(req.rid)
                self._finish(req, tick, end_ms)
            else:
                survivors.append(req)
        if completed:
            self.batch_is_full = False  # filter_batch at the next step
        self.running = survivors
        return self._decode_record(
            tick, decoding, retracted, completed, free_after_sched, grown, duration, rejected
        )

    def _retract(self) -> list[str]:
        """``retract_decode`` (schedule_batch.py) and its ratio estimate."""
        running = self.running
        order = sorted(
            range(len(running)),
            key=lambda i: (running[i].out, -running[i].request.prompt_tokens),
            reverse=True,
        )
        retracted: list[Req] = []
        first = True
        while first or not self._check_decode_mem([running[i] for i in order]):
            if len(order) == 1:
                break
            first = False
            victim = running[order.pop()]
            self._release(victim, checkpoint=False)  # release_req
            self._evict_for(len(order) * self.retract_steps)
            victim.kv_len = victim.prefix_len = 0  # reset_for_retract
            victim.last_node = None
            victim.retractions += 1
            victim.pieces = 0
            self.retractions += 1
            self.retracted_ids.add(victim.rid)
            retracted.append(victim)
        if not self._check_decode_mem([running[i] for i in order]):
            raise ReplayError("sglang: a single running request cannot decode; the KV pool is too small")
        self.running = [running[i] for i in order]
        kept = self.running
        decoded = sum(r.out for r in kept)
        max_new = sum(r.max_new_tokens for r in kept)
        self.ratio = min(1.0, (decoded + self.retract_steps * len(kept)) / (max_new + 1))
        self.waiting.extend(retracted)
        return [r.rid for r in retracted]

    def _run_idle(self, tick: int, rejected: tuple[str, ...]) -> TickRecord:
        """No batch: ``on_idle`` (resets the ratio only when fully idle)."""
        if self.waiting or self.chunked:
            raise ReplayError(
                f"sglang: {len(self.waiting)} requests wait but none can be admitted into an "
                f"empty engine of {self.capacity} tokens"
            )
        self.ratio = self.init_ratio
        return self._idle_record(tick, rejected)
