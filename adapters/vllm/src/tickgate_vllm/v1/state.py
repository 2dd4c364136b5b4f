"""The declared state of the ``vllm-v1`` scheduler that its mixins share, for the type checker:
:class:`SchedulerState` is the base of every mixin of :class:`~.scheduler.VllmV1Scheduler`; it declares
the attributes that ``VllmV1Scheduler.__init__`` sets and the methods one mixin calls on another
(annotations and ``TYPE_CHECKING`` stubs only: nothing of it runs per step)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from collections import deque
    from collections.abc import Callable, Iterable, Sequence

    from tickgate import Clock, RequestOutcome, TickRecord, TimingModel

    from .offload import Offload
    from .options import V1Config
    from .pool import BlockPool
    from .request import RequestState
    from .spec import SpecDecoding


class SchedulerState:
    """The state and the cross-path methods the mixins of
    :class:`~.scheduler.VllmV1Scheduler` share, declared for the type checker.

    Every mixin subclasses it. At run time the class holds annotations only: the
    values are set in ``VllmV1Scheduler.__init__`` (a few later: ``kv_events_on``,
    the recording ``_cache`` and ``_apply_span`` of :mod:`.events`), and the method
    stubs exist under ``TYPE_CHECKING`` alone (the mixin that defines a method
    overrides its stub; the type checker holds both to one signature). So it
    shadows nothing in the method resolution order and adds nothing per step.
    """

    # the plugin's configuration and the engine's collaborators
    cfg: V1Config
    kv_capacity: dict[str, Any] | None
    clock: Clock
    timing: TimingModel | None
    observer: Callable[[dict[str, Any]], None] | None
    block_size: int
    prefix_block_size: int | None
    prefix_caching: bool
    by_priority: bool
    max_model_len: int | None
    max_span: int | None
    watermark_blocks: int
    priced_shape: bool
    hash_lookahead: int
    # the block pool, the queues and what a step hands back
    pool: BlockPool
    gpu_ids: list[int] | None
    running: list[RequestState]
    waiting_fifo: deque[RequestState]
    waiting_heap: list[RequestState]
    outcomes: list[RequestOutcome]
    rejected_now: list[str]
    ordinal: int
    running_joins: int
    plain_ids: bool
    chunk_shape: tuple[int, int, int, int]
    # the fast paths: spans and the decode group
    steady: bool
    finish_next: bool
    last_body: tuple[Any, ...] | None
    last_record: TickRecord | None
    kv_sample: tuple[int, int]
    _span_duration: float | None
    group_ok: bool
    grouped: bool
    decode_clock: int
    phase_members: list[int]
    last_tokens: list[tuple[int, int, RequestState]]
    group_context: int
    undealt_blocks: list[int]
    members_view: tuple[tuple[str, ...], list[Any], list[str]] | None
    group_blocker: RequestState | None
    # speculative decoding and CPU KV offload
    spec: SpecDecoding | None
    step_spec: SpecDecoding
    offload: Offload | None
    # KV events (v1.events) and conformance (v1.observe)
    kv_events_on: bool
    observed_fast_steps: int
    # totals for the summary
    total_preemptions: int
    total_admissions: int
    total_hit_tokens: int
    total_query_tokens: int
    total_first_hit_tokens: int
    total_first_query_tokens: int
    total_sched_tokens: int
    total_steps: int
    tokens_hist: dict[int, int]
    kv_peak: int
    kv_blocks_sum: int
    transferred_requests: int
    transferred_tokens: int
    transferred_hit_tokens: int
    #: ``BlockOps._cache`` and ``Spans._apply_span``, or with KV events their recording
    #: versions bound on the instance (``KvEventOps.enable_kv_events``)
    _cache: Callable[[RequestState, int], None]
    _apply_span: Callable[[int, list[int]], None]

    if TYPE_CHECKING:
        # -- v1.scheduler
        def _n_waiting(self) -> int: ...

        # -- v1.reference
        def _make_room(
            self,
            q: RequestState,
            slot: int,
            idx: int,
            sched: dict[RequestState, list[Any]],
            preempted: list[RequestState],
        ) -> tuple[int, int, int, int]: ...
        def _admission(self, q: RequestState, budget: int, thr: int) -> tuple[list[int], int, int] | None: ...
        def _admit(self, q: RequestState, hits: list[int], n: int, new_blocks: int, tick: int) -> int: ...

        # -- v1.fcfs
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
        ) -> tuple[int, int, int, int, int, int, int]: ...

        # -- v1.blocks
        def _grow(self, q: RequestState, n: int) -> None: ...
        def _take_hits(self, q: RequestState, hits: list[int], new_blocks: int) -> None: ...
        def _register_own(self, q: RequestState, upto: int) -> None: ...
        def _release(self, q: RequestState, finished: bool = False) -> None: ...
        def _preempt(self, q: RequestState) -> None: ...

        # -- v1.spans
        def _timed_limit(
            self, limit: int, until_ms: float | None, r: int, ctx0: int
        ) -> tuple[int, float]: ...
        def _apply_span_by_step(self, n: int, firsts: list[int]) -> int: ...

        # -- v1.group
        def _group_leave(self) -> None: ...

        # -- v1.observe
        def _observe_steady_span(self, n: int, firsts: Sequence[int]) -> None: ...
        def _observe_group_span(self, n: int) -> None: ...
        def _observe_step(
            self,
            tick: int,
            running: Sequence[RequestState],
            before_clock: int | None,
            admitted: list[list[Any]],
            num_tokens: int,
            finished: list[str],
            free_after_sched: int,
        ) -> None: ...

        # -- v1.records
        def _step_time(
            self,
            prefill_tokens: int,
            decode_tokens: int,
            context: int,
            firsts: Iterable[RequestState],
            tick: int,
        ) -> tuple[float | None, float | None]: ...
        def _chunk(self, before: int, n: int) -> None: ...
        def _finish(self, finished: Iterable[RequestState], tick: int, end_ms: float | None) -> list[str]: ...
        def _count_step(self, tokens: int, kv_after_sched: int) -> None: ...
        def _record(
            self,
            tick: int,
            body: tuple[Any, ...],
            kv_after_sched: int,
            free_after_sched: int,
            span: int,
            duration: float | None,
            sj: list[str],
        ) -> TickRecord: ...
        def _outcome(self, q: RequestState, tick: int, end_ms: float | None) -> RequestOutcome: ...

        # -- v1.spec_step
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
        ) -> tuple[list[int], int, int, bool] | None: ...

        # -- v1.offload_step
        def _offload_waiting_pass(
            self,
            tick: int,
            token_budget: int,
            input_budget: int,
            thr: int,
            sched: dict[RequestState, list[Any]],
            prefill_scheduled: bool,
            drafts_needed: bool,
        ) -> tuple[int, int, bool, int]: ...
        def _offload_collect(self, tick: int, end_ms: float | None) -> dict[str, Any]: ...
        def _offload_idle_time(self) -> tuple[float, float]: ...
