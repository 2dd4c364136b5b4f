"""``vllm-kv-events``: vLLM KV-cache event batches (msgpack), both encodings.

vLLM's ``KVEventBatch`` is ``[ts, events, data_parallel_rank]`` (array-like);
its events were array-like tagged structs until 0.28, maps with a ``type`` key
since. ``BlockStored`` arrays carry vLLM's ``medium`` and later fields, which
SGLang's do not: a two-item batch whose ``BlockStored`` has exactly the five
legacy fields is left to ``sglang-kv-events`` (force ``--format`` for an old
vLLM capture of that shape).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate.interfaces import BackendMirror
from tickgate.readers.common import clean_aggregates, document, provenance, read_bytes
from tickgate.readers.kv_events import KvSummary, first_batch_shape, summarize, to_extra


def is_sglang_shape(shape: tuple[str, int, int | None]) -> bool:
    encoding, length, stored = shape
    return encoding == "array" and length == 2 and stored in (None, 6)


def version(s: KvSummary) -> str:
    batch = "+".join(sorted(s.batch_encoding))
    events = "+".join(sorted(s.event_encoding)) or "none"
    return f"batch={batch}; events={events}" + ("; (map events: vLLM >= 0.28)" if "map" in s.event_encoding else "")


def kv_document(path: Path, fmt: str, backend: str, ver: Any) -> dict[str, Any]:
    s = summarize(read_bytes(path), path)
    notes = ["KV events give cache activity only: blocks stored/removed and resident-set peaks, run-level"]
    if s.removed_unknown:
        notes.append(f"{s.removed_unknown} removed block(s) were never seen stored (capture began mid-stream)")
    agg: dict[str, Any] = {"extra": to_extra(s)}
    if s.first_ts is not None and s.last_ts is not None and s.batches > 1:
        agg["duration_s"] = round(s.last_ts - s.first_ts, 6)
    run = {"backend": backend,
           "provenance": provenance(path, fmt, ver(s), notes, media=sorted(s.media),
                                    data_parallel_ranks=sorted(s.dp_ranks)),
           "aggregates": clean_aggregates(agg)}
    return document(run)


class VllmKvEventsMirror(BackendMirror):
    name: ClassVar[str] = "vllm-kv-events"
    description: ClassVar[str] = "vLLM KV-cache events: msgpack EventBatch, array and map encodings"

    def sniff(self, path: Path, head: bytes) -> bool:
        shape = first_batch_shape(head)
        return shape is not None and not is_sglang_shape(shape)

    def read(self, path: Path) -> dict[str, Any]:
        return kv_document(path, self.name, "vllm", version)
