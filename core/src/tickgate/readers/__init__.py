"""Readers of what engines and benchmark clients write.

Shared parsing the adapters use through the public API (``from tickgate
import ...``; they depend on ``tickgate`` only): Prometheus text
(:mod:`.prometheus`, and the ``/metrics`` mirror base in :mod:`.scrapemirror`),
SSE framing (:mod:`.sse`), stream evidence (:mod:`.streams`) and the SSE
mirror bases (:mod:`.ssemirror`), KV events (msgpack, decoded by msgspec:
:mod:`.kv_events`, the mirrors' document in :mod:`.kvmirror`), bench-client
results (:mod:`.benchkeys`), percentiles (:mod:`.stats`), field access and
document building (:mod:`.common`). What is one engine's (names, units,
format generations) stays in its adapter. Format detection: :mod:`.detect`.
"""
