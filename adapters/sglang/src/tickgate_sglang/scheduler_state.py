"""The state of the ``sglang`` mirror, typed once for the scheduler and its mixins.

:class:`~.scheduler.SglangScheduler` is one class assembled from mixins (:class:`~.step_result.StepResults`,
:class:`~.decode_batch.DecodeBatch`, :class:`~.kv_memory.KvMemory`) that read the attributes its
``__init__`` sets and call each other's methods. Each mixin subclasses :class:`SchedulerState`, which
declares those attributes (annotations only: no values, so nothing exists at runtime that could
shadow an attribute or a method) and, for the type checker only, the methods one part calls on
another, with the signatures of their definitions (which the checker holds them to).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickgate import Clock, RequestOutcome, TickRecord, TimingModel

    from .radix_cache import RadixCache
    from .request_state import Req
    from .schedule_policy import SchedulePolicy


class SchedulerState:
    """Every attribute :class:`~.scheduler.SglangScheduler` sets on itself (see ``__init__`` there)."""

    # -- options ---------------------------------------------------------------
    kv_capacity: dict[str, Any] | None
    page: int
    capacity: int
    max_running: int
    max_reqs: int
    max_prefill: int
    chunk_size: int | None
    max_req_len: int
    policy_name: str
    init_ratio: float
    min_ratio: float
    decay: float
    clip: int
    retract_steps: int
    ignore_eos: bool
    radix: bool
    block_size: int
    block_tail: tuple[int, ...]
    policy: SchedulePolicy
    clock: Clock
    timing: TimingModel | None
    # -- state -----------------------------------------------------------------
    tree: RadixCache
    ratio: float
    waiting: list[Req]
    running: list[Req]
    chunked: Req | None
    last_prefill: list[Req] | None
    batch_is_full: bool
    own_tokens: int
    seq: int
    outcomes: list[RequestOutcome]
    rejected_now: list[str]
    observer: Callable[[dict[str, Any]], None] | None
    # -- totals ----------------------------------------------------------------
    total_hit: int
    total_extend: int
    retractions: int
    retracted_ids: set[str]
    evicted: int
    prefill_batches: int
    decode_batches: int
    chunks: int
    clipped: int

    if TYPE_CHECKING:
        # methods one part calls on another, defined in the part named

        # KvMemory
        @property
        def available(self) -> int: ...
        def _evict_for(self, tokens: int) -> None: ...
        def _set_own(self, req: Req, held: int) -> None: ...
        def _release(self, req: Req, *, checkpoint: bool) -> None: ...
        def match(self, req: Req, *, limit: bool = True) -> None: ...

        # StepResults
        def _decode_record(
            self,
            tick: int,
            decoding: list[str],
            retracted: list[str],
            completed: list[str],
            free_after_sched: int,
            grown: int,
            duration: float | None,
            rejected: tuple[str, ...],
        ) -> TickRecord: ...
        def _idle_record(self, tick: int, rejected: tuple[str, ...]) -> TickRecord: ...

        # SglangScheduler
        def _duration(self, prefill: int, seqs: int, context: int) -> float | None: ...
        def _finish(self, req: Req, tick: int, end_ms: float | None) -> None: ...
