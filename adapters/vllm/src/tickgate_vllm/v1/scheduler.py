"""The ``vllm-v1`` scheduler: vLLM 0.33's v1 ``Scheduler.schedule()`` +
``update_from_output()`` (``vllm/v1/core/sched/scheduler.py``) for text-only
requests, step for step. This module is the plugin (its options, the engine
protocol, ``add_request()``'s checks) and :meth:`VllmV1Scheduler.step`, which
picks the path a step takes; the paths live in their own modules:

=====================  ===================================================================
module                 what it holds (and what it mirrors)
=====================  ===================================================================
:mod:`.options`     the options, vLLM's knob names and defaults
:mod:`.request`     per-request state (``vllm/v1/request.py``'s ``Request``), prompt block
                       keys (``kv_cache_utils.py``'s chained block hashes)
:mod:`.reference`   the reference step: ``schedule()`` + ``update_from_output()`` as
                       written, two passes, any policy (priority runs it), and the waiting
                       pass's admission checks
:mod:`.fcfs`        the same step for fcfs in one pass per queue
:mod:`.spans`       fast-forwarding: runs of identical decode-only steps in one go
:mod:`.group`       the decode group: fcfs steps and spans at the cost of their events
:mod:`.blocks`      a request's blocks: ``kv_cache_manager.py``'s ``allocate_slots()``,
                       ``cache_blocks()``, ``free()``; ``_preempt_request()``
:mod:`.pool`        the block pool: free queue and prefix cache (``block_pool.py``)
:mod:`.events`      KV-cache events where ``block_pool.py`` emits them, when asked for
:mod:`.records`     records, outcomes, per-step totals; :mod:`.summary` the summary
:mod:`.observe`     the observer lines of the fast paths' steps (conformance)
:mod:`.spec_step`   the extended full step: speculative decoding (:mod:`.spec`) and CPU
                       KV offload (:mod:`.offload`, :mod:`.offload_step`,
                       :mod:`.cpu_tier`, :mod:`.set_order`)
=====================  ===================================================================

One step, as in vLLM (see docs/vllm.md for the full list and what is not mirrored):

1. Running requests, in running-queue order, each get
   ``min(tokens still to compute, long_prefill_token_threshold, budget left)``
   tokens (the threshold only when more than one request is in the engine).
   Their blocks are allocated on demand; when the pool is short, the victim
   (fcfs: last in the running queue; priority: worst ``(priority, arrival)``)
   is preempted by recompute: its blocks are freed and it goes back to the
   front of the waiting queue. A fcfs request that has to preempt itself ends
   the running pass; a priority one lets the better requests after it go on.
2. Only if nothing was preempted: waiting requests in queue order (fcfs, or
   ``(priority, arrival)``) while budget and ``max_num_seqs`` allow, with
   strict head-of-line blocking. Prefix-cache hits are whole cached blocks of
   the request's chained block hashes, at most ``num_tokens - 1`` tokens. The
   head is admitted only if the blocks for its whole sequence fit
   (``scheduler_reserve_full_isl``) and those for this step's chunk fit,
   keeping ``watermark * num_gpu_blocks`` free while anything runs. Without
   chunked prefill a prompt that does not fit the budget stops admission.
3. Every request whose prefill is complete samples one token; a request that
   reaches ``max_output_tokens`` (or ``max_model_len``) finishes and frees its
   blocks in reverse order.

Which path a step takes (:meth:`VllmV1Scheduler.step`), fastest first (with
speculative decoding or CPU KV offload on, always the extended full step,
:meth:`~.spec_step.SpecStep._spec_step`):

- fcfs, every running request a plain decoder: the decode group's span or step
  (:meth:`~.group.DecodeGroup._group_span`, :meth:`~.group.DecodeGroup._group_step`);
- after a decode-only step: a span of identical steps
  (:meth:`~.spans.Spans._steady_span`), or under fcfs with nothing waiting the
  step where requests sample their last token
  (:meth:`~.spans.Spans._finishing_decode_step`); under fcfs with nothing
  waiting, a span starting now (:meth:`~.spans.Spans._fresh_span`);
- otherwise the full step: :meth:`~.fcfs.FcfsStep._full_step_fcfs` (fcfs) or
  :meth:`~.reference.ReferenceStep._full_step` (priority; with ``max_span: 1``,
  every step is a full one).

With an ``observer`` attached (conformance) the same paths run; the fast ones
hand it the line of every step they cover (:mod:`.observe`).

The paths are mixins of one class sharing the state set in
:meth:`VllmV1Scheduler.__init__` (a call between them is an ordinary method
call; no per-step indirection is added); their common base
:class:`~.request.SchedulerState` declares that state and those calls for the
type checker (annotations only at run time). Every path makes the decisions of the
reference step: the conformance fixtures and the fast-forward property tests
check it.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from tickgate import BuildContext, Horizon, Request, RequestOutcome, Scheduler, TickRecord

from .blocks import BlockOps
from .events import KvEventOps
from .fcfs import FcfsStep
from .group import DecodeGroup
from .observe import ObservedSteps
from .offload import Offload
from .offload_step import OffloadStep
from .options import OPTIONS_SCHEMA, V1Config, resolve_num_gpu_blocks
from .pool import BlockPool
from .records import Records
from .reference import ReferenceStep
from .request import RequestState, prompt_block_keys
from .spans import Spans, span_record
from .spec import SpecDecoding, lookahead_block_keys, no_spec
from .spec_step import SpecStep

__all__ = ["RequestState", "VllmV1Scheduler", "prompt_block_keys"]


class VllmV1Scheduler(
    KvEventOps,
    DecodeGroup,
    Spans,
    FcfsStep,
    ReferenceStep,
    SpecStep,
    OffloadStep,
    Records,
    BlockOps,
    ObservedSteps,
    Scheduler,
):
    """The ``vllm-v1`` scheduler plugin (see the module docstring for its parts)."""

    name = "vllm-v1"
    description = (
        "vLLM 0.33 v1 scheduler (fcfs/priority, chunked prefill, prefix caching, recompute preemption)."
    )
    options_schema = OPTIONS_SCHEMA
    uses_admission_policy = False
    uses_kv_allocator = False
    supports_data_parallel = True  # DP: one engine core (scheduler, KV cache) per rank
    admission_note = (
        "vLLM admits strictly in its own waiting-queue order (fcfs or priority) with "
        "head-of-line blocking; an external admission policy would change the semantics"
    )
    #: the decode side of disaggregated prefill/decode (:meth:`add_transferred`)
    accepts_transferred_kv = True

    def __init__(self, cfg: V1Config, ctx: BuildContext, kv_capacity: dict[str, Any] | None = None) -> None:
        self.cfg = cfg
        #: how ``num_gpu_blocks: auto`` was sized (the report's ``kv_capacity``); None when given
        self.kv_capacity = kv_capacity
        self.block_size = cfg.block_size
        self.clock = ctx.clock
        self.timing = ctx.timing
        #: the timing model prices a step's prefill chunks by their shape (price_step)
        self.priced_shape = ctx.timing is not None and ctx.timing.prices_shape
        self.chunk_shape = (0, 0, 0, 0)  # the step's prefill chunks so far (Records._chunk)
        self.prefix_block_size = ctx.prefix_block_size
        pbs = self.prefix_block_size
        if pbs is not None and pbs % self.block_size and self.block_size % pbs:
            from tickgate import TickgateError

            raise TickgateError(
                f"vllm-v1: the workload's prefix blocks cover {pbs} tokens and "
                f"block_size is {self.block_size}; one must be a multiple of the other"
            )
        self.pool = BlockPool(cfg.num_gpu_blocks, cfg.enable_prefix_caching)
        self.prefix_caching = cfg.enable_prefix_caching
        self.by_priority = cfg.policy == "priority"
        self.max_model_len = cfg.max_model_len
        self.watermark_blocks = int(cfg.watermark * cfg.num_gpu_blocks)
        self.running: list[RequestState] = []
        self.waiting_fifo: deque[RequestState] = deque()
        self.waiting_heap: list[RequestState] = []
        self.outcomes: list[RequestOutcome] = []
        self.rejected_now: list[str] = []
        self.ordinal = 0
        self.max_span = cfg.max_span
        #: called with a dict per engine step (conformance); the fast paths expand theirs (v1.observe)
        self.observer: Callable[[dict[str, Any]], None] | None = None
        # steady-state fast path: the last step only decoded, nothing changed since
        self.steady = False
        self.finish_next = False  # see _steady_span
        self.last_body: tuple[Any, ...] | None = None
        self.last_record: TickRecord | None = None
        self._span_duration: float | None = None  # of the last span, timed replays
        self.kv_sample = (0, self.pool.usable)
        self.plain_ids = True  # every request id is a str (records carry pre-encoded details)
        self.running_joins = 0  # running-queue joins so far
        # the decode group (see _group_enter): every running request, decoding,
        # with its fields as of the decode clock when it joined (v1.group)
        self.grouped = False
        #: speculative decoding (v1.spec), None when off; with it every step is a _spec_step
        self.spec = SpecDecoding(cfg) if cfg.num_speculative_tokens else None
        self.hash_lookahead = self.spec.hash_lookahead if self.spec is not None else 0
        #: CPU KV offload (v1.offload), None when off; with it too every step is the extended step
        self.offload = (
            Offload(cfg, self.block_size, self.prefix_caching, ctx.timing, self.by_priority, self.pool.usable)
            if cfg.kv_offload_cpu_blocks
            else None
        )
        #: vLLM's GPU block ids without prefix caching (offload's fences need them), else None
        self.gpu_ids = self.offload.gpu_free if self.offload is not None else None
        #: what the extended step (v1.spec_step) reads drafts from: the drafts' state, or none
        self.step_spec = self.spec if self.spec is not None else no_spec(cfg)
        self.group_ok = (
            not self.by_priority and self.max_span != 1 and self.spec is None and self.offload is None
        )
        self.decode_clock = 0
        # members by allocation phase, twice over (window sums)
        self.phase_members = [0] * (2 * self.block_size)
        # (step of its last token, running_seq, member), a heap
        self.last_tokens: list[tuple[int, int, RequestState]] = []
        self.group_context = 0  # the members' tokens at decode_clock: the context of the next decode step
        self.undealt_blocks: list[int] = []  # blocks popped for members, not yet dealt out
        self.members_view: tuple[tuple[str, ...], list[Any], list[str]] | None = None
        self.group_blocker: RequestState | None = None  # the running request that kept the group from forming
        # totals for extra_summary
        self.total_preemptions = 0
        self.total_admissions = 0
        self.total_hit_tokens = 0
        self.total_query_tokens = 0
        self.total_first_hit_tokens = 0
        self.total_first_query_tokens = 0
        self.total_sched_tokens = 0
        self.total_steps = 0
        self.tokens_hist: dict[int, int] = {}
        self.kv_peak = 0
        self.kv_blocks_sum = 0
        # requests that arrived with their prompt KV (add_transferred), counted at admission
        self.transferred_requests = 0
        self.transferred_tokens = 0  # their prompt tokens the transfer brought (the local hits excluded)
        self.transferred_hit_tokens = 0  # their prompt tokens found in the local prefix cache

    @classmethod
    def build(cls, options: Mapping[str, Any], ctx: BuildContext) -> VllmV1Scheduler:
        options, capacity = resolve_num_gpu_blocks(options, ctx.timing)
        return cls(V1Config.from_options(options), ctx, capacity)

    # -- engine protocol -------------------------------------------------------
    def add(self, request: Request) -> None:
        self._add(request)

    def add_transferred(self, request: Request) -> None:
        """A request whose prompt KV a remote prefill computed and transferred; it
        arrives now, as :meth:`add` does (same checks and rejections).

        vLLM's decode side of a NIXL hand-off
        (``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py``:
        ``NixlConnectorScheduler.get_num_new_matched_tokens`` returns
        ``len(prompt) - local hits`` tokens to load asynchronously,
        ``update_state_after_alloc`` queues the read into the blocks just
        allocated; ``vllm/v1/core/sched/scheduler.py``: the waiting pass allocates
        blocks for the whole prompt through ``allocate_slots(...,
        num_external_computed_tokens=...)`` and parks the request in
        ``WAITING_FOR_REMOTE_KVS``; ``_update_waiting_for_remote_kv`` caches the
        loaded blocks and sets ``num_computed_tokens = num_tokens - 1``; the
        next pass schedules that one token, which samples the first output
        token). The fleet has already spent the transfer time when the request
        enters, so the two visits are one: the request waits in the waiting
        queue in policy order like any other (head-of-line blocking); when its
        turn comes it is admitted only if the blocks of its whole prompt, less
        its local prefix-cache hits, fit with the usual checks (full sequence,
        watermark, ``max_num_seqs``, token budget); it is then scheduled for its
        last prompt token and samples its first output token in that step
        (:meth:`~.reference.ReferenceStep._admission`,
        :meth:`~.reference.ReferenceStep._admit`). A later preemption frees its
        blocks and it recomputes like any other request (so does vLLM:
        ``update_state_after_alloc`` cleared ``do_remote_prefill``, so the
        connector matches nothing the second time).
        """
        q = self._add(request)
        if q is not None:
            q.transferred = True

    def _add(self, request: Request) -> RequestState | None:
        """Queue ``request`` (``add_request()``), or reject it with the reason; its state."""
        p = request.prompt_tokens
        timed = self.timing is not None
        arrival_ms = (
            request.arrival_ms if request.arrival_ms is not None else (self.clock.now_ms if timed else None)
        )
        if self.max_model_len is not None and p >= self.max_model_len:
            self._reject(
                request,
                arrival_ms,
                f"prompt of {p} tokens >= max_model_len {self.max_model_len} "
                "(vLLM rejects it before scheduling)",
                key="prompt reaches max_model_len (vLLM rejects it before scheduling)",
                figures={"prompt_tokens": p, "max_model_len": self.max_model_len},
            )
            return None
        last = p + request.max_output_tokens
        if self.max_model_len is not None:
            last = min(last, self.max_model_len)
        need = -(-(last - 1) // self.block_size)
        if need > self.pool.usable:
            self._reject(
                request,
                arrival_ms,
                f"needs {need} KV blocks of {self.block_size} tokens; the pool "
                f"has {self.pool.usable} (vLLM would stall on it)",
                key="needs more KV blocks than the pool has (vLLM would stall on it)",
                figures={
                    "needed_blocks": need,
                    "block_tokens": self.block_size,
                    "pool_blocks": self.pool.usable,
                },
            )
            return None
        keys = (
            prompt_block_keys(request, self.block_size, self.prefix_block_size) if self.prefix_caching else []
        )
        if self.hash_lookahead:
            keys = lookahead_block_keys(request, keys, self.block_size)
        q = RequestState(request, self.ordinal, keys, self.clock.tick, arrival_ms)
        if q.id_json is None:
            self.plain_ids = False
        if self.offload is not None:  # the connector's block hashes exist with or without GPU prefix caching
            self.offload.track(
                q,
                keys
                if self.prefix_caching
                else prompt_block_keys(request, self.block_size, self.prefix_block_size),
            )
        self.ordinal += 1
        if self.by_priority:
            heapq.heappush(self.waiting_heap, q)
        else:
            self.waiting_fifo.append(q)
        self.steady = False
        return q

    def has_work(self) -> bool:
        return (
            bool(self.running)
            or bool(self.waiting_fifo)
            or bool(self.waiting_heap)
            or bool(self.rejected_now)
            or (self.offload is not None and self.offload.busy())
        )

    def pop_outcomes(self) -> list[RequestOutcome]:
        out, self.outcomes = self.outcomes, []
        return out

    def kv_capacity_pages(self) -> int:
        return self.pool.usable

    def prefix_hit_tokens(self) -> int:
        """Prompt tokens the prefix cache spared the prefill at requests' first admissions (a
        fleet's ``prefix_cache_hit_rate`` divides them by the prompt tokens). On the decode side
        of a disaggregated fleet the prompt was prefilled elsewhere: its local hits spare no
        compute (they are the ``transferred`` block's ``local_hit_tokens``) and are left out.
        With CPU KV offload the tokens loaded from the CPU tier count too (both tiers spare it)."""
        hits = self.total_first_hit_tokens - self.transferred_hit_tokens
        if self.offload is not None:
            hits += self.offload.first_cpu_hit_tokens
        return hits

    def kv_used_pages(self) -> int:
        return self.pool.used

    def decode_slots_per_tick(self) -> int:
        return self.cfg.max_num_seqs

    def _n_waiting(self) -> int:
        n = len(self.waiting_heap) if self.by_priority else len(self.waiting_fifo)
        if self.offload is not None:
            n += len(self.offload.holding)
        return n

    # -- one step ---------------------------------------------------------------
    def step(self, horizon: Horizon) -> TickRecord:
        if self.spec is not None:  # speculative decoding: always the extended full step (v1.spec_step)
            return self._spec_step()
        if self.offload is not None:
            return self._offload_step(horizon)
        finishing = self.finish_next  # set by the span just applied, if it ended where a request finishes
        self.finish_next = False
        if self.group_ok:
            if self.grouped or self._group_enter():
                if not finishing and (self.steady or (not self.waiting_fifo and not self.rejected_now)):
                    record = self._group_span(horizon)
                    if record is not None:
                        return record
                record = self._group_step()
                if record is not None:
                    return record
                self._group_leave()
        elif self.grouped:
            self._group_leave()
        if self.max_span != 1:
            if self.steady:
                if not finishing:
                    span = self._steady_span(horizon)
                    if span > 0:
                        return span_record(self, span)
                if not self.by_priority and not self.waiting_fifo and not self.rejected_now:
                    record = self._finishing_decode_step()
                    if record is not None:
                        return record
            elif not self.by_priority and not self.waiting_fifo and not self.rejected_now and self.running:
                record = self._fresh_span(horizon)
                if record is not None:
                    return record
        if self.by_priority:
            return self._full_step()
        return self._full_step_fcfs()

    def _offload_step(self, horizon: Horizon) -> TickRecord:
        """A step with CPU KV offload: the extended full step, or under fcfs while the
        connector is quiescent and nothing waits (:meth:`~.offload.Offload.quiescent`)
        the per-request fast paths (spans, the finishing step; not the decode group),
        which decide what the full step would."""
        off = self.offload
        assert off is not None  # step() takes this path only with offload on
        finishing = self.finish_next
        self.finish_next = False
        if (
            self.max_span == 1
            or self.by_priority
            or self.waiting_fifo
            or self.rejected_now
            or not self.running
            or not off.quiescent()
        ):
            return self._spec_step()
        record: TickRecord | None = None
        if self.steady:
            if not finishing:
                span = self._steady_span(horizon)
                if span > 0:
                    record = span_record(self, span)
            if record is None:
                record = self._finishing_decode_step()
        else:
            record = self._fresh_span(horizon)
        if record is None:
            return self._spec_step()
        off.sync_blocks(self.running)
        return record
