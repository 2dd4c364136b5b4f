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

from tickgate import (BackendMirror, KvSummary, first_batch_shape, kv_events_document, legacy_array_batch,
                      read_kv_events)


def version(s: KvSummary) -> str:
    batch = "+".join(sorted(s.batch_encoding))
    events = "+".join(sorted(s.event_encoding)) or "none"
    return f"batch={batch}; events={events}" + ("; (map events: vLLM >= 0.28)" if "map" in s.event_encoding else "")


class VllmKvEventsMirror(BackendMirror):
    name: ClassVar[str] = "vllm-kv-events"
    description: ClassVar[str] = "vLLM KV-cache events: msgpack EventBatch, array and map encodings"

    def sniff(self, path: Path, head: bytes) -> bool:
        shape = first_batch_shape(head)
        return shape is not None and not legacy_array_batch(shape)

    def read(self, path: Path) -> dict[str, Any]:
        s = read_kv_events(path)
        return kv_events_document(path, s, self.name, "vllm", version(s), media=sorted(s.media),
                                  data_parallel_ranks=sorted(s.dp_ranks))
