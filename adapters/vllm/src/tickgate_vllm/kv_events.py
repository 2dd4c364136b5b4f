"""``vllm-kv-events``: vLLM KV-cache event batches (msgpack), both encodings.

vLLM's ``KVEventBatch`` is ``[ts, events, data_parallel_rank]`` (array-like);
its events were array-like tagged structs until 0.28, maps with a ``type`` key
since. ``BlockStored`` arrays carry vLLM's ``medium`` and later fields, which
SGLang's do not: a two-item batch whose ``BlockStored`` has exactly the five
legacy fields is left to ``sglang-kv-events`` (force ``--format`` for an old
vLLM capture of that shape). tickgate's own files (``tickgate replay
--kv-events``) are read here too; a fleet's name each replica in a fourth batch
element, and the provenance's ``replicas`` gives each one's counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tickgate import (
    BackendMirror,
    KvSummary,
    first_batch_shape,
    kv_events_document,
    legacy_array_batch,
    read_kv_events,
)


def version(s: KvSummary) -> str:
    batch = "+".join(sorted(s.batch_encoding))
    events = "+".join(sorted(s.event_encoding)) or "none"
    return f"batch={batch}; events={events}" + (
        "; (map events: vLLM >= 0.28)" if "map" in s.event_encoding else ""
    )


class VllmKvEventsMirror(BackendMirror):
    name: ClassVar[str] = "vllm-kv-events"
    description: ClassVar[str] = "vLLM KV-cache events: msgpack EventBatch, array and map encodings"

    def sniff(self, path: Path, head: bytes) -> bool:
        shape = first_batch_shape(head)
        return shape is not None and not legacy_array_batch(shape)

    def read(self, path: Path) -> dict[str, Any]:
        s = read_kv_events(path)
        replicas = {
            name: {"blocks_stored": c[0], "blocks_removed": c[1], "resident_blocks_at_end": c[2]}
            for name, c in sorted(s.replicas.items())
        }
        return kv_events_document(
            path,
            s,
            self.name,
            "vllm",
            version(s),
            media=sorted(s.media),
            data_parallel_ranks=sorted(s.dp_ranks),
            replicas=replicas,
        )
