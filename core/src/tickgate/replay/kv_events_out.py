"""Writing KV-cache events in vLLM's ``KVEventBatch`` msgpack framing.

A file is what a ZMQ subscriber of vLLM's ``ZmqEventPublisher`` would keep of
the payload frames: concatenated msgpack ``EventBatch`` values, topic and
sequence frames dropped (docs/design/fleets-sources.md section 4; the format
``tickgate normalize`` reads as ``vllm-kv-events``). The encoding is vLLM
0.33's (``vllm/distributed/kv_events.py``): the batch is an array-like struct
``[ts, events, data_parallel_rank]``, the events are tagged maps
(``{"type": "BlockStored", ...}``) with vLLM's always-present fields
(``block_hashes``, ``parent_block_hash``, ``token_ids``, ``block_size``,
``lora_id``, ``medium``, ``lora_name``; ``BlockRemoved``: ``block_hashes``,
``medium``) and the defaulted ones omitted, as its ``omit_defaults=True``
structs encode them. msgspec is vLLM's own encoder, so the bytes are what its
``msgspec.msgpack.Encoder().encode(batch)`` gives for the same values.

Two things tickgate has to decide, documented in docs/vllm.md ("KV events"):

* ``token_ids``: tickgate requests carry no token ids. Each stored block gets
  ``block_size`` synthetic ids made of its hash: the hash's four 16-bit words,
  repeated (``h & 0xFFFF, h >> 16 & 0xFFFF, ...``; each below 65536, at most 3
  bytes of msgpack, like real vocabulary ids). So ``len(token_ids) ==
  len(block_hashes) * block_size`` holds as in vLLM, and a consumer that hashes
  a block's token content (Dynamo's ``LocalBlockHash``) sees two blocks alike
  exactly when their hashes are (for blocks of at least 4 tokens).
* the replica: vLLM names a stream only by its ZMQ topic and endpoint (one
  publisher per DP rank, port offset by rank), which a payload file loses. A
  batch of a named replica gets a fourth element, the replica's name:
  ``[ts, events, data_parallel_rank, replica]``. vLLM's ``KVEventBatch`` is an
  ``array_like`` msgspec struct, and msgspec ignores trailing array elements
  it has no field for, so vLLM's own decoder reads such a batch (tested in
  tests/test_kv_events_out.py); tickgate's reader keeps one resident set per
  (replica, rank). A single replay names no replica: plain 3-item batches.

Deterministic: the bytes depend only on the values written (no wall clock).
"""

from __future__ import annotations

from typing import IO, Any

import msgspec

from ..interfaces import AllBlocksCleared, BlockRemoved, BlockStored

__all__ = ["KvEventCounts", "KvEventSink", "KvEventWriter"]


class _Stored(msgspec.Struct, tag="BlockStored", omit_defaults=True, gc=False):
    block_hashes: tuple[int, ...]
    parent_block_hash: int | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None


class _Removed(msgspec.Struct, tag="BlockRemoved", omit_defaults=True, gc=False):
    block_hashes: tuple[int, ...]
    medium: str | None


class _Cleared(msgspec.Struct, tag="AllBlocksCleared", omit_defaults=True, gc=False):
    pass


_Event = _Stored | _Removed | _Cleared


class _Batch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[_Event]
    data_parallel_rank: int | None = None


class _NamedBatch(msgspec.Struct, array_like=True, gc=False):
    ts: float
    events: list[_Event]
    data_parallel_rank: int | None
    replica: str


class KvEventCounts:
    """What a writer wrote: the report's ``kv_events`` block (docs/report.md).

    ``resident_at_end`` replays the events over one set of hashes per named
    (replica, rank) and one for unnamed batches, as tickgate's reader does, so
    it is what a consumer of the file sees resident."""

    __slots__ = (
        "batches",
        "blocks_removed",
        "blocks_stored",
        "cleared_events",
        "peak_resident",
        "removed_events",
        "resident",
        "stored_events",
        "streams",
        "tokens_stored",
    )

    def __init__(self) -> None:
        self.batches = 0
        self.stored_events = 0
        self.removed_events = 0
        self.cleared_events = 0
        self.blocks_stored = 0
        self.blocks_removed = 0
        self.tokens_stored = 0
        self.resident = 0
        self.peak_resident = 0
        self.streams: dict[tuple[str, int | None] | None, set[int]] = {}

    def resident_set(self, stream: tuple[str, int | None] | None) -> set[int]:
        resident = self.streams.get(stream)
        if resident is None:
            resident = self.streams[stream] = set()
        return resident

    def to_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "events": {
                "BlockStored": self.stored_events,
                "BlockRemoved": self.removed_events,
                "AllBlocksCleared": self.cleared_events,
            },
            "blocks_stored": self.blocks_stored,
            "blocks_removed": self.blocks_removed,
            "tokens_stored": self.tokens_stored,
            "peak_resident_blocks": self.peak_resident,
            "resident_blocks_at_end": self.resident,
        }


def _tokens(hashes: tuple[int, ...], per: int) -> list[int]:
    """Synthetic token ids of blocks (module docstring): each hash's four 16-bit words, repeated."""
    reps, rest = divmod(per, 4)
    tokens: list[int] = []
    for h in hashes:
        words = [h & 0xFFFF, (h >> 16) & 0xFFFF, (h >> 32) & 0xFFFF, h >> 48]
        tokens += words * reps
        if rest:
            tokens += words[:rest]
    return tokens


class KvEventWriter:
    """Writes batches of tickgate KV events to a binary file handle.

    ``write_batch(ts_s, events, data_parallel_rank, replica)``: one vLLM
    ``KVEventBatch`` (vLLM publishes one per engine step that produced
    events; an empty list writes nothing, as vLLM publishes nothing).
    ``counts`` holds what was written. The caller owns the handle (write it
    through :func:`tickgate.util.atomic.atomic_writer` so a failed run leaves
    nothing behind).
    """

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.counts = KvEventCounts()
        self._encoder = msgspec.msgpack.Encoder()

    def write_batch(
        self,
        ts_s: float,
        events: list[Any],
        data_parallel_rank: int | None = None,
        replica: str | None = None,
    ) -> None:
        if not events:
            return
        c = self.counts
        resident = c.resident_set(None if replica is None else (replica, data_parallel_rank))
        wire: list[_Event] = []
        add = wire.append
        n_stored = n_cleared = b_stored = b_removed = tokens = 0
        held = c.resident
        peak = c.peak_resident
        # one pass: the wire structs and the counts. A replay's events are mostly one-block
        # removals: one costs a struct and a list extend (its hash tuple goes to the encoder as
        # it is: msgspec writes a tuple as the array a list gives), and a run of them leaves the
        # resident set in one call, before the next store or clear (the peak is taken at stores)
        gone: list[int] = []  # hashes removed since the last store or clear, still in ``resident``
        for ev in events:
            t = type(ev)
            if t is BlockRemoved:
                add(_Removed(ev.block_hashes, ev.medium))
                gone += ev.block_hashes
                continue
            if gone:
                before = len(resident)
                resident.difference_update(gone)
                held -= before - len(resident)
                b_removed += len(gone)
                gone = []
            if t is BlockStored:
                hs = ev.block_hashes
                add(
                    _Stored(
                        hs,
                        ev.parent_block_hash,
                        _tokens(hs, ev.block_size),
                        ev.block_size,
                        None,
                        ev.medium,
                        None,
                    )
                )
                n_stored += 1
                b_stored += len(hs)
                tokens += ev.token_count
                before = len(resident)
                resident.update(hs)
                held += len(resident) - before
                if held > peak:
                    peak = held
            elif t is AllBlocksCleared:
                add(_Cleared())
                n_cleared += 1
                held -= len(resident)
                resident.clear()
            else:
                raise TypeError(f"not a KV event: {t.__name__}")
        if gone:
            before = len(resident)
            resident.difference_update(gone)
            held -= before - len(resident)
            b_removed += len(gone)
        batch: _Batch | _NamedBatch
        if replica is None:
            batch = _Batch(float(ts_s), wire, data_parallel_rank)
        else:
            batch = _NamedBatch(float(ts_s), wire, data_parallel_rank, replica)
        self.fh.write(self._encoder.encode(batch))
        c.batches += 1
        c.stored_events += n_stored
        c.removed_events += len(wire) - n_stored - n_cleared
        c.cleared_events += n_cleared
        c.blocks_stored += b_stored
        c.blocks_removed += b_removed
        c.tokens_stored += tokens
        c.resident = held
        c.peak_resident = peak


class KvEventSink:
    """A replay sink that drains the scheduler's KV events after each record and
    writes them as one batch (what vLLM publishes after a step that produced events).

    ``ts``: the simulated clock, never the wall clock. Timed replays: the end of
    the record's step (or span) in seconds from the replay's start (vLLM stamps
    a batch after the step, with ``time.time()``); untimed: the record's step
    number. ``data_parallel_rank`` 0, as a single vLLM engine publishes it; no
    replica name (a fleet names its replicas, :class:`KvEventWriter`).
    """

    def __init__(
        self,
        scheduler: Any,
        clock: Any,
        writer: KvEventWriter,
        *,
        timed: bool,
        data_parallel_rank: int | None = 0,
        replica: str | None = None,
    ) -> None:
        self.drain = scheduler.drain_kv_events
        self.clock = clock
        self.writer = writer
        self.timed = timed
        self.rank = data_parallel_rank
        self.replica = replica

    def record(self, record: Any) -> None:
        events = self.drain()
        if events:
            if self.timed:
                ts = (self.clock.now_ms + (record.duration_ms or 0.0)) / 1000.0
            else:
                ts = float(record.tick)
            self.writer.write_batch(ts, events, self.rank, self.replica)

    def outcome(self, outcome: Any) -> None:
        pass

    def arrival(self, request: Any) -> None:
        pass
