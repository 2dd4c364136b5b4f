"""``sglang-kv-events``: SGLang KV-cache event batches (msgpack).

SGLang's publisher (ported from vLLM's) sends array-like ``[ts, events]``
batches without a data-parallel rank; ``BlockStored`` has the five legacy
fields (block_hashes, parent_block_hash, token_ids, block_size, lora_id).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import (
    BackendMirror,
    InputError,
    first_batch_shape,
    kv_events_document,
    legacy_array_batch,
    read_kv_events,
)


class SglangKvEventsMirror(BackendMirror):
    name: ClassVar[str] = "sglang-kv-events"
    description: ClassVar[str] = "SGLang KV-cache events: msgpack [ts, events] batches"

    def sniff(self, path: Path, head: bytes) -> bool:
        shape = first_batch_shape(head)
        return shape is not None and legacy_array_batch(shape)

    def read(self, path: Path) -> dict[str, Any]:
        s = read_kv_events(path)
        if "map" in s.event_encoding or "map" in s.batch_encoding:
            raise InputError(
                path, "map-encoded KV events are vLLM's (>= 0.28); read with --format vllm-kv-events"
            )
        return kv_events_document(path, s, self.name, "sglang", "array-like")
