"""An engine's KV events in a fleet: applied to the fleet's index of resident blocks (the
prefix-aware router reads it) and/or written to ``--kv-events``."""

from __future__ import annotations

from typing import Any

from ..interfaces.model import Request, RequestOutcome
from .replica import Engine

__all__ = ["EventSink"]


class EventSink:
    """An engine's KV events after each of its records: applied to the fleet's index
    of resident blocks and/or written, one batch per record, stamped with the
    simulated end of the step in seconds and named by replica and rank."""

    __slots__ = ("drain", "engine", "fleet", "index", "replica", "writer")

    def __init__(self, fleet: Any, engine: Engine, writer: Any, index: bool) -> None:
        self.drain = engine.scheduler.drain_kv_events
        self.fleet = fleet
        self.engine = engine
        self.writer = writer
        self.index = index
        self.replica = fleet.targets_of[engine.index].name

    def record(self, record: Any) -> None:
        events = self.drain()
        if not events:
            return
        if self.index:
            self.fleet.events.apply(self.engine.index, events)
        if self.writer is not None:
            ts = (self.engine.clock.now_ms + (record.duration_ms or 0.0)) / 1000.0
            self.writer.write_batch(ts, events, self.engine.rank, self.replica)

    def arrival(self, request: Request) -> None:
        pass

    def outcome(self, outcome: RequestOutcome) -> None:
        pass
