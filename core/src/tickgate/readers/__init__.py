"""Readers of what engines and benchmark clients write.

Shared parsing that the adapters import (they depend on ``tickgate`` only):
Prometheus text (:mod:`.prometheus`), SSE framing (:mod:`.sse`) and stream
evidence (:mod:`.streams`), KV events (msgpack, decoded by msgspec:
:mod:`.kv_events`), bench-client keys and arrays (:mod:`.benchkeys`),
percentiles (:mod:`.stats`), field access and document building
(:mod:`.common`). Format detection: :mod:`.detect`.
"""
