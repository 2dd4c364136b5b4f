"""What the engines' KV-event mirrors share: reading a capture into a
:class:`~tickgate.readers.kv_events.KvSummary`, the observation document it
becomes, and the batch shape that tells SGLang's publisher from vLLM's.

The events are the same msgpack structs in both engines (SGLang ported vLLM's
publisher), so the figures and their notes are the same; each adapter says
which captures are its own and how it names their version.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import clean_aggregates, document, provenance
from .kv_events import KvSummary, summarize_file, to_extra


def legacy_array_batch(shape: tuple[str, int, int | None]) -> bool:
    """Whether a first batch (:func:`~tickgate.readers.kv_events.first_batch_shape`)
    is shaped as SGLang's publisher sends it: array-like ``[ts, events]`` without
    a data-parallel rank, whose ``BlockStored`` (if any) has the five legacy fields."""
    encoding, length, stored = shape
    return encoding == "array" and length == 2 and stored in (None, 6)


def read_kv_events(path: Path) -> KvSummary:
    """The summary of a capture file (events replayed over the resident blocks),
    read as a stream: no limit on its size, memory bounded by the resident sets."""
    return summarize_file(path)


def kv_events_document(
    path: Path, s: KvSummary, fmt: str, backend: str, version: str, **details: Any
) -> dict[str, Any]:
    """The run-level observation of a capture: the event counters in ``extra``,
    the capture's duration when it spans several batches; ``details`` go to the
    provenance (empty ones are left out)."""
    notes = ["KV events give cache activity only: blocks stored/removed and resident-set peaks, run-level"]
    if s.removed_unknown:
        notes.append(
            f"{s.removed_unknown} removed block(s) were never seen stored (capture began mid-stream)"
        )
    agg: dict[str, Any] = {"extra": to_extra(s)}
    if s.first_ts is not None and s.last_ts is not None and s.batches > 1:
        agg["duration_s"] = round(s.last_ts - s.first_ts, 6)
    run = {
        "backend": backend,
        "provenance": provenance(path, fmt, version, notes, **details),
        "aggregates": clean_aggregates(agg),
    }
    return document(run)
