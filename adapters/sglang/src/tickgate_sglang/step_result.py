"""What one step of the ``sglang`` mirror reports: its :class:`~tickgate.TickRecord`
and, for conformance, the step in the SGLang reference harness's per-step format
(``../shared/tools/sglang-reference/README.md``, "Per-step JSONL fields").

A mixin of :class:`~.scheduler.SglangScheduler`, kept apart so the scheduler's
module is its loop.
"""

from __future__ import annotations

from typing import Any

from tickgate import TickRecord

from .request_state import Req
from .scheduler_state import SchedulerState


class StepResults(SchedulerState):
    """Builds the step's record and hands the harness-format line to ``observer``."""

    def _line(self, tick: int, batch: str | None, free_after_sched: int, **fields: Any) -> None:
        if self.observer is None:
            return
        line: dict[str, Any] = {
            "step": tick,
            "batch": batch,
            "admitted": [],
            "chunk_continued": [],
            "decoding": [],
            "retracted": [],
            "finished": [],
            "aborted": [],
        }
        line.update(fields)
        line["chunked"] = self.chunked.rid if self.chunked is not None else None
        line["free_tokens_after_sched"] = free_after_sched
        line["free_tokens"] = self.available
        line["evictable_tokens"] = self.tree.evictable_size
        line["protected_tokens"] = self.tree.protected_size
        line["new_token_ratio"] = round(self.ratio, 6)
        line.setdefault("running", len(self.running))
        line["waiting"] = len(self.waiting)
        self.observer(line)

    def _used_pages(self) -> int:
        return (self.tree.total_size + self.own_tokens) // self.page

    def _prefill_record(
        self,
        tick: int,
        batch: list[Req],
        admitted: list[list[Any]],
        continued: list[list[Any]],
        scheduled: dict[str, int],
        hit: int,
        prefill: int,
        completed: list[str],
        free_after_sched: int,
        grown: int,
        active: int,
        duration: float | None,
        rejected: tuple[str, ...],
    ) -> TickRecord:
        self._line(
            tick,
            "prefill",
            free_after_sched,
            admitted=admitted,
            chunk_continued=continued,
            finished=completed,
            running=active,
        )
        detail: dict[str, Any] = {
            "batch": "prefill",
            "scheduled": scheduled,
            "prefix_hit_tokens": hit,
            "new_token_ratio": round(self.ratio, 6),
        }
        if self.chunked is not None:
            detail["chunked"] = self.chunked.rid
        return TickRecord(
            tick=tick,
            admitted=tuple(a[0] for a in admitted),
            prefill_tokens=prefill,
            queued=len(self.waiting),
            active=active + len(completed) + (1 if self.chunked is not None else 0),
            kv_pages_used=self._used_pages(),
            kv_pages_reserved=max(grown, 0) // self.page,
            completed=tuple(completed),
            rejected=rejected,
            duration_ms=duration,
            detail=detail,
        )

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
    ) -> TickRecord:
        self._line(
            tick, "decode", free_after_sched, decoding=decoding, retracted=retracted, finished=completed
        )
        detail: dict[str, Any] = {"batch": "decode", "new_token_ratio": round(self.ratio, 6)}
        return TickRecord(
            tick=tick,
            decoded=tuple(decoding),
            decode_tokens=len(decoding),
            queued=len(self.waiting),
            active=len(self.running) + len(completed),
            kv_pages_used=self._used_pages(),
            kv_pages_reserved=max(grown, 0) // self.page,
            completed=tuple(completed),
            preempted=tuple(retracted),
            rejected=rejected,
            duration_ms=duration,
            detail=detail,
        )

    def _idle_record(self, tick: int, rejected: tuple[str, ...]) -> TickRecord:
        self._line(tick, None, self.available)
        return TickRecord(tick=tick, rejected=rejected, duration_ms=self._duration(0, 0, 0))
