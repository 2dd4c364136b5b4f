"""``sglang-kv-events``: SGLang KV-cache event batches (msgpack).

SGLang's publisher (ported from vLLM's) sends array-like ``[ts, events]``
batches without a data-parallel rank; ``BlockStored`` has the five legacy
fields (block_hashes, parent_block_hash, token_ids, block_size, lora_id).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate.errors import InputError
from tickgate.interfaces import BackendMirror
from tickgate.readers.common import clean_aggregates, document, provenance, read_bytes
from tickgate.readers.kv_events import first_batch_shape, summarize, to_extra


class SglangKvEventsMirror(BackendMirror):
    name: ClassVar[str] = "sglang-kv-events"
    description: ClassVar[str] = "SGLang KV-cache events: msgpack [ts, events] batches"

    def sniff(self, path: Path, head: bytes) -> bool:
        shape = first_batch_shape(head)
        return shape is not None and shape[0] == "array" and shape[1] == 2 and shape[2] in (None, 6)

    def read(self, path: Path) -> dict[str, Any]:
        s = summarize(read_bytes(path), path)
        if "map" in s.event_encoding or "map" in s.batch_encoding:
            raise InputError(path, "map-encoded KV events are vLLM's (>= 0.28); read with --format vllm-kv-events")
        notes = ["KV events give cache activity only: blocks stored/removed and resident-set peaks, run-level"]
        if s.removed_unknown:
            notes.append(f"{s.removed_unknown} removed block(s) were never seen stored (capture began mid-stream)")
        agg: dict[str, Any] = {"extra": to_extra(s)}
        if s.first_ts is not None and s.last_ts is not None and s.batches > 1:
            agg["duration_s"] = round(s.last_ts - s.first_ts, 6)
        run = {"backend": "sglang", "provenance": provenance(path, self.name, "array-like", notes),
               "aggregates": clean_aggregates(agg)}
        return document(run)
