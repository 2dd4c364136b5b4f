"""The observer lines of the fast paths: what each engine step they cover would
have logged as a full step.

The conformance check (:mod:`.conformance`, ``tickgate conformance vllm``)
attaches an ``observer`` and compares one line per engine step with the real
vLLM scheduler's recording (``../shared/tools/vllm-reference``'s per-step JSONL:
``step``, ``sched`` entries ``[id, tokens, kind, computed_before]``,
``num_tokens``, ``preempted``, ``finished``, the free blocks and running
requests after ``schedule()`` and after ``update_from_output()``, ``waiting``).
The full steps (:meth:`~.fcfs.FcfsStep._full_step_fcfs`,
:meth:`~.reference.ReferenceStep._full_step`) build that line as they go. The
fast paths decide the same steps without visiting them one by one (a span of
``n`` decode steps is one call), so each calls one method here, only when an
observer is attached, which expands what it decided into the lines of the steps
it covers, from the state before them:

- a decode-only step or span (:meth:`~.spans.Spans._steady_span`, hence
  :meth:`~.spans.Spans._fresh_span`, and the decode group's
  :meth:`~.group.DecodeGroup._group_span`): every running request, in
  running order, schedules one token on top of its computed tokens, ``k`` more
  at the span's ``k``-th step; the blocks ``allocate_slots()`` takes in a step
  are those whose boundary a request's new token crosses (request ``i`` first
  at step ``firsts[i]``, then every ``block_size`` steps), so free blocks after
  scheduling drop by that many; nothing finishes, is preempted or admitted, so
  free blocks after the step equal those after scheduling and the queues keep
  their lengths;
- one step with finishes (:meth:`~.spans.Spans._finishing_decode_step`, the
  group's :meth:`~.group.DecodeGroup._group_step`, which may also admit):
  the line the full step logs, from the running order the step started with,
  the admissions' own entries and the pool after the step.

No vLLM code does this (vLLM runs and logs every step). With no observer none of
it runs: a fast path pays one ``observer is None`` test per call (it used to be
paid in :meth:`~.scheduler.VllmV1Scheduler.step` instead). ``max_span: 1``
turns the fast paths off, so the conformance check can compare both
(``tickgate conformance vllm --slow-path``). ``observed_fast_steps`` counts the
lines built here (the rest came from full steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickgate import PluginError

from .request import RequestState
from .state import SchedulerState


class ObservedSteps(SchedulerState):
    """Observer lines of the fast paths of :class:`~.scheduler.VllmV1Scheduler` (a mixin)."""

    #: lines built by the fast paths' expansions (an instance attribute once one is)
    observed_fast_steps = 0

    def _observe_line(
        self,
        tick: int,
        sched: list[list[Any]],
        num_tokens: int,
        finished: list[str],
        free_after_sched: int,
        running_after_sched: int,
        free: int,
        running: int,
        waiting: int,
    ) -> None:
        """Hand one step's line to the observer, as the full steps build it (no preemption:
        a fast path never preempts)."""
        assert self.observer is not None
        self.observed_fast_steps += 1
        line = {
            "step": tick,
            "sched": sched,
            "num_tokens": num_tokens,
            "preempted": [],
            "finished": finished,
            "free_blocks_after_sched": free_after_sched,
            "running_after_sched": running_after_sched,
            "free_blocks": free,
            "running": running,
            "waiting": waiting,
        }
        if self.offload is not None:  # a quiescent connector's fields (v1.offload.Offload.quiescent)
            line.update(
                kv_lookup=[], kv_admit=[], kv_load=[], kv_store=[], kv_flush=[], kv_done=[], waiting_for_kv=[]
            )
        self.observer(line)

    def _observe_decode_span(
        self,
        n: int,
        running: Sequence[RequestState],
        computed: Sequence[int],
        firsts: Sequence[int],
        free: int,
    ) -> None:
        """The lines of ``n`` decode-only steps from the current tick: ``running`` in
        running order with ``computed`` tokens each before the first step, request
        ``i`` taking a block at step ``firsts[i]`` (0-based) and every ``block_size``
        steps after, ``free`` blocks before the first step."""
        bs = self.block_size
        taken = [0] * n  # blocks taken at each step
        for k0 in firsts:
            if k0 < 0:  # pragma: no cover - a decoder's blocks cover all but its newest token
                raise PluginError(f"vllm-v1: a decode span whose request lacks {-k0} blocks")
            for k in range(k0, n, bs):
                taken[k] += 1
        tick = self.clock.tick
        r = len(running)
        waiting = self._n_waiting()
        ids = [q.id for q in running]
        for k in range(n):
            free -= taken[k]
            sched = [[rid, 1, "running", c + k] for rid, c in zip(ids, computed)]
            self._observe_line(tick + k, sched, r, [], free, r, free, r, waiting)

    def _observe_steady_span(self, n: int, firsts: Sequence[int]) -> None:
        """:meth:`_observe_decode_span` for :meth:`~.spans.Spans._steady_span`, before it
        applies the span (every running request's fields are current)."""
        running = self.running
        self._observe_decode_span(
            n, running, [q.num_computed_tokens for q in running], firsts, self.pool.free
        )

    def _observe_group_span(self, n: int) -> None:
        """:meth:`_observe_decode_span` for the decode group's span, before the decode
        clock ``D`` moves: a member's fields hold at its ``group_clock``, so at ``D`` it
        has ``D - group_clock`` more computed tokens, and it takes its next block at the
        step where ``D + k`` reaches its allocation phase (``group_phase``) modulo
        ``block_size`` (see :meth:`~.group.DecodeGroup._join`)."""
        D = self.decode_clock
        bs = self.block_size
        running = self.running
        computed = [q.num_computed_tokens + D - q.group_clock for q in running]
        firsts = [(q.group_phase - D) % bs for q in running]
        self._observe_decode_span(n, running, computed, firsts, self.pool.free)

    def _observe_step(
        self,
        tick: int,
        running: Sequence[RequestState],
        before_clock: int | None,
        admitted: list[list[Any]],
        num_tokens: int,
        finished: list[str],
        free_after_sched: int,
    ) -> None:
        """The line of one step whose running requests (``running``, the order it
        started with) each decoded one token, then ``admitted`` (the admissions'
        ``[id, tokens, kind, computed_before]``, after ``running`` in that list too).

        Called at the step's end: each request in ``running`` has computed its
        token, as of decode clock ``before_clock + 1`` for a decode-group member
        whose fields lag (``group_clock``), so it had one fewer before the step;
        ``before_clock`` is ``None`` outside the group."""
        sched: list[list[Any]] = []
        m = len(running) - len(admitted)
        for q in running[:m]:
            c = q.num_computed_tokens - 1
            if before_clock is not None:
                c += before_clock + 1 - q.group_clock
            sched.append([q.id, 1, "running", c])
        sched.extend(admitted)
        self._observe_line(
            tick,
            sched,
            num_tokens,
            finished,
            free_after_sched,
            len(running),
            self.pool.free,
            len(self.running),
            self._n_waiting(),
        )
