"""KV-cache event batches (vLLM and SGLang ``--kv-events-config`` publishers).

A capture file is the concatenation of msgpack ``EventBatch`` payloads as the
ZMQ publisher sends them (one per message, the topic and sequence frames
dropped). Both encodings msgspec has produced are accepted:

* array-like: batch ``[ts, events]`` (SGLang, early vLLM) or
  ``[ts, events, data_parallel_rank]`` (vLLM), events ``["BlockStored",
  block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, ...]``;
* maps: events ``{"type": "BlockStored", "block_hashes": [...], ...}``
  (vLLM 0.28+) and batches ``{"ts", "events", "data_parallel_rank"}``;
* tickgate's fleets: ``[ts, events, data_parallel_rank, replica]``, the
  replica's name as a fourth element (``tickgate replay --kv-events``,
  :mod:`tickgate.replay.kv_events_out`; vLLM's own array-like decoder ignores it).

The summary replays the events over a set of resident block hashes: stored
adds, removed discards, AllBlocksCleared empties. Hashes may be ints or bytes.
Batches that name a replica keep one set per (replica, rank), the KV pool each
stands for; unnamed batches share one set, as before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec

from ..util.errors import InputError
from ..util.locations import open_binary, reading

EVENT_TYPES = ("BlockStored", "BlockRemoved", "AllBlocksCleared")
#: positions of fields in the array-like encoding (index 0 is the tag)
_STORED_FIELDS = (
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
)
_REMOVED_FIELDS = ("block_hashes", "medium", "group_idx")


@attrs.define
class KvSummary:
    batches: int = 0
    events: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(EVENT_TYPES, 0))
    blocks_stored: int = 0
    blocks_removed: int = 0
    removed_unknown: int = 0
    tokens_stored: int = 0
    peak_resident: int = 0
    resident_end: int = 0
    block_sizes: set[int] = attrs.Factory(set)
    media: set[str] = attrs.Factory(set)
    dp_ranks: set[int] = attrs.Factory(set)
    first_ts: float | None = None
    last_ts: float | None = None
    batch_encoding: set[str] = attrs.Factory(set)
    event_encoding: set[str] = attrs.Factory(set)
    batch_lengths: set[int] = attrs.Factory(set)
    stored_lengths: set[int] = attrs.Factory(set)
    #: replicas named by 4-item batches -> [blocks stored, blocks removed, resident at end]
    replicas: dict[str, list[int]] = attrs.Factory(dict)


class _ExtSeen:
    """What an ext value decodes to: KV-event payloads never hold one."""

    def __init__(self, code: int) -> None:
        self.code = code


#: ext values decoded since the list was last emptied (a batch is walked for one only then)
_EXT_SEEN: list[_ExtSeen] = []


def _on_ext(code: int, data: memoryview) -> _ExtSeen:
    _EXT_SEEN.append(_ExtSeen(code))
    return _EXT_SEEN[-1]


_DECODER = msgspec.msgpack.Decoder(ext_hook=_on_ext)
#: finds where an object ends without building it (a ``Raw`` value is a view of the input)
_SKIP = msgspec.msgpack.Decoder(msgspec.Raw)
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
#: a capture file is read this many bytes at a time (more when one batch is bigger)
CHUNK_BYTES = 1 << 20


def decode_all(data: bytes, path: Path | str) -> Iterator[tuple[int, Any]]:
    """Every top-level msgpack object of a concatenated stream held in memory,
    with its byte offset."""
    chunks = [data]
    return decode_stream(lambda _: chunks.pop() if chunks else b"", path)


def decode_file(path: Path) -> Iterator[tuple[int, Any]]:
    """Every top-level msgpack object of the file ``path``, with its byte
    offset, read :data:`CHUNK_BYTES` at a time: memory holds one chunk and the
    batch being decoded, whatever the file's size (a fleet's capture runs to
    hundreds of MB). A pipe streams too: the file is read once, front to back."""
    with open_binary(path) as fh:
        read = fh.read

        def located(size: int) -> bytes:
            with reading(path):
                return read(size)

        yield from decode_stream(located, path)


def decode_stream(read: Callable[[int], bytes], path: Path | str) -> Iterator[tuple[int, Any]]:
    """Every top-level msgpack object of the bytes ``read(n)`` returns until it
    returns none, with its byte offset. msgspec decodes one object per call:
    where the next one starts is the offset of the "trailing characters" it
    reports; an object cut by the end of what was read so far is decoded again
    when more is read (at least as much again as is held: an object of any size
    costs linear time). Errors name the byte in the whole stream, as when it is
    decoded at once."""
    buf = read(CHUNK_BYTES)
    base = pos = 0  # buf starts at byte ``base`` of the stream; the next object at buf[pos]
    eof = not buf
    while True:
        if pos == len(buf):
            if eof:
                return
            base, pos, buf = base + pos, 0, read(CHUNK_BYTES)
            eof = not buf
            continue
        start = base + pos
        try:
            obj, length = _next_object(memoryview(buf)[pos:], start, path)
        except _Truncated:
            if eof:
                raise InputError(
                    path,
                    f"msgpack data ends inside the object that starts at byte {start} "
                    f"(the file ends at byte {base + len(buf)}): truncated?",
                ) from None
            more = read(max(CHUNK_BYTES, len(buf) - pos))
            if more:
                base, pos, buf = start, 0, buf[pos:] + more
            else:
                eof = True
            continue
        yield start, obj
        pos += length


def _next_object(view: memoryview, start: int, path: Path | str) -> tuple[Any, int]:
    """The first object of ``view`` and its length in bytes; :class:`_Truncated`
    when ``view`` ends inside it. Skipping finds its end (a quarter of the cost
    of decoding it); only that object is then decoded. When the skip fails, the
    full decoder says why in its own words (or it is a batch the skip could not
    walk: a nesting too deep for it)."""
    try:
        _SKIP.decode(view)
        length: int | None = len(view)
    except msgspec.DecodeError as exc:
        trailing = _TRAILING.search(str(exc))
        length = int(trailing.group(1)) if trailing else None
    except RecursionError:
        length = None
    if length is not None:
        return _decode_one(view[:length], start, path), length
    try:
        return _decode_one(view, start, path), len(view)
    except _Trailing as more:
        return _decode_one(view[: more.at], start, path), more.at


class _Trailing(Exception):
    def __init__(self, at: int) -> None:
        self.at = at


class _Truncated(Exception):
    """The data ends inside an object: more may come (a stream), or the file is truncated."""


def _decode_one(view: memoryview, start: int, path: Path | str) -> Any:
    _EXT_SEEN.clear()
    try:
        obj = _DECODER.decode(view)
    except RecursionError:
        raise InputError(
            path, f"msgpack nesting too deep in the object that starts at byte {start}"
        ) from None
    except msgspec.DecodeError as exc:
        message = str(exc)
        trailing = _TRAILING.search(message)
        if trailing:
            raise _Trailing(int(trailing.group(1))) from None
        if message == "Input data was truncated":
            raise _Truncated from None
        detail = message.replace("MessagePack data is malformed: ", "")
        detail = re.sub(r"\(byte (\d+)\)", lambda m: f"(byte {start + int(m.group(1))})", detail)
        raise InputError(
            path,
            f"invalid msgpack in the object that starts at byte {start}: {detail[:1].lower()}{detail[1:]}",
        ) from None
    ext = _find_ext(obj, "$") if _EXT_SEEN else None
    if ext is not None:
        raise InputError(
            path,
            f"batch at byte {start}: unsupported msgpack ext type {ext[1]} at {ext[0]} "
            "(ext types are not KV-event data)",
        )
    return obj


def _find_ext(obj: Any, where: str) -> tuple[str, int] | None:
    """The JSON path and code of the first ext value in ``obj``, if any. Walks
    containers only (a batch is a few lists; the ids inside them are ints)."""
    if isinstance(obj, _ExtSeen):
        return where, obj.code
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            if isinstance(item, (list, dict, _ExtSeen)):
                found = _find_ext(item, f"{where}[{i}]")
                if found is not None:
                    return found
    elif isinstance(obj, dict):
        for key, item in obj.items():
            if isinstance(key, _ExtSeen):
                return f"{where} (a key)", key.code
            if isinstance(item, (list, dict, _ExtSeen)):
                found = _find_ext(item, f"{where}.{key}")
                if found is not None:
                    return found
    return None


def _fail(path: Path | str, offset: int, where: str, msg: str) -> InputError:
    return InputError(path, f"batch at byte {offset}: {msg}", json_path=where)


def _event_fields(
    ev: Any, path: Path | str, offset: int, where: str, summary: KvSummary
) -> tuple[str, dict[str, Any]]:
    if isinstance(ev, dict):
        summary.event_encoding.add("map")
        tag = ev.get("type")
        fields = ev  # read by field name only (never "type"): no copy without the tag
    elif isinstance(ev, list) and ev:
        summary.event_encoding.add("array")
        tag = ev[0]
        names = _STORED_FIELDS if tag == "BlockStored" else _REMOVED_FIELDS if tag == "BlockRemoved" else ()
        if len(ev) - 1 > len(names) and tag != "BlockStored":
            raise _fail(path, offset, where, f"{tag} has {len(ev) - 1} fields; expected at most {len(names)}")
        if tag == "BlockStored":
            summary.stored_lengths.add(len(ev))
        fields = dict(zip(names, ev[1:]))
    else:
        raise _fail(path, offset, where, f"expected an event (array or map), got {type(ev).__name__}")
    if tag not in EVENT_TYPES:
        raise _fail(
            path, offset, where, f"unknown event type {tag!r}; expected one of {', '.join(EVENT_TYPES)}"
        )
    return tag, fields


#: the types of decoded values that are ints (``isinstance(v, int)``) and hashes (an int, not a
#: bool, or bytes): msgspec decodes to built-in types only, so a set of types, checked in C, says it
_INT_TYPES = frozenset((int, bool))
_HASH_TYPES = frozenset((int, bytes))


def _hashes(value: Any, path: Path | str, offset: int, where: str) -> list[Any]:
    if not isinstance(value, list) or not _HASH_TYPES.issuperset(map(type, value)):
        raise _fail(path, offset, where, "block_hashes must be a list of ints or bytes")
    return value


def summarize(data: bytes, path: Path | str) -> KvSummary:
    """Decode every batch of a capture held in memory and replay its events."""
    return summarize_batches(decode_all(data, path), path)


def summarize_file(path: Path) -> KvSummary:
    """Decode every batch of the capture file ``path`` as it is read and replay
    its events: memory holds the resident sets, not the file."""
    return summarize_batches(decode_file(path), path)


def summarize_batches(batches: Iterable[tuple[int, Any]], path: Path | str) -> KvSummary:
    """Replay the events of ``(offset, batch)`` pairs (:func:`decode_stream`);
    errors name byte and JSON path. None at all: the file is empty."""
    summary = KvSummary()
    streams: dict[Any, set[Any]] = {}
    resident_total = 0
    for offset, batch in batches:
        replica = None
        if isinstance(batch, list):
            summary.batch_encoding.add("array")
            summary.batch_lengths.add(len(batch))
            if len(batch) not in (2, 3, 4):
                raise _fail(
                    path,
                    offset,
                    "$",
                    "expected [ts, events], [ts, events, dp_rank] or [ts, events, "
                    f"dp_rank, replica], got {len(batch)} items",
                )
            ts, events = batch[0], batch[1]
            rank = batch[2] if len(batch) >= 3 else None
            if len(batch) == 4:
                replica = batch[3]
                if not isinstance(replica, str):
                    raise _fail(
                        path, offset, "$[3]", f"expected the replica's name (a string), got {replica!r}"
                    )
        elif isinstance(batch, dict):
            summary.batch_encoding.add("map")
            if "events" not in batch or "ts" not in batch:
                raise _fail(path, offset, "$", "expected a map with 'ts' and 'events'")
            ts, events, rank = batch["ts"], batch["events"], batch.get("data_parallel_rank")
        else:
            raise _fail(
                path, offset, "$", f"expected an EventBatch (array or map), got {type(batch).__name__}"
            )
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise _fail(path, offset, "$.ts", f"expected a timestamp number, got {ts!r}")
        if not isinstance(events, list):
            raise _fail(path, offset, "$.events", f"expected a list of events, got {type(events).__name__}")
        if rank is not None:
            if isinstance(rank, bool) or not isinstance(rank, int):
                raise _fail(path, offset, "$.data_parallel_rank", f"expected an int or nil, got {rank!r}")
            summary.dp_ranks.add(rank)
        summary.batches += 1
        stream = None if replica is None else (replica, rank)
        resident = streams.get(stream)
        if resident is None:
            resident = streams[stream] = set()
        per = None
        if replica is not None:
            per = summary.replicas.get(replica)
            if per is None:
                per = summary.replicas[replica] = [0, 0, 0]
        summary.first_ts = ts if summary.first_ts is None else min(summary.first_ts, ts)
        summary.last_ts = ts if summary.last_ts is None else max(summary.last_ts, ts)
        for i, ev in enumerate(events):
            where = f"$.events[{i}]"
            tag, fields = _event_fields(ev, path, offset, where, summary)
            summary.events[tag] += 1
            medium = fields.get("medium")
            if isinstance(medium, str):
                summary.media.add(medium)
            if tag == "AllBlocksCleared":
                resident_total -= len(resident)
                resident.clear()
                continue
            hashes = _hashes(fields.get("block_hashes"), path, offset, where + ".block_hashes")
            if tag == "BlockStored":
                tokens = fields.get("token_ids")
                if not isinstance(tokens, list) or not _INT_TYPES.issuperset(map(type, tokens)):
                    raise _fail(path, offset, where + ".token_ids", "token_ids must be a list of ints")
                size = fields.get("block_size")
                if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
                    raise _fail(path, offset, where + ".block_size", f"expected a positive int, got {size!r}")
                summary.block_sizes.add(size)
                summary.blocks_stored += len(hashes)
                summary.tokens_stored += len(tokens)
                if per is not None:
                    per[0] += len(hashes)
                before = len(resident)
                resident.update(hashes)
                resident_total += len(resident) - before
                summary.peak_resident = max(summary.peak_resident, resident_total)
            else:
                summary.blocks_removed += len(hashes)
                if per is not None:
                    per[1] += len(hashes)
                before = len(resident)
                for h in hashes:
                    if h in resident:
                        resident.discard(h)
                    else:
                        summary.removed_unknown += 1
                resident_total += len(resident) - before
    if not summary.batches:
        raise InputError(path, "empty file: expected msgpack KV event batches")
    summary.resident_end = sum(len(r) for r in streams.values())
    for (name, _), members in ((k, v) for k, v in streams.items() if k is not None):
        summary.replicas[name][2] += len(members)
    return summary


def first_batch_shape(head: bytes) -> tuple[str, int, int | None] | None:
    """(batch encoding, batch length, BlockStored array length) of the first
    batch in ``head``, for sniffing; None when it is not a KV event batch."""
    if not head or head[0] not in (0x92, 0x93, 0x94, 0x82, 0x83):
        return None
    if b"BlockStored" not in head and b"BlockRemoved" not in head and b"AllBlocksCleared" not in head:
        return None
    try:
        _, batch = next(decode_all(head, "<head>"))
    except InputError:
        return ("array" if head[0] in (0x92, 0x93, 0x94) else "map", (head[0] & 0x0F), None)
    if isinstance(batch, dict):
        return ("map", len(batch), None)
    if not isinstance(batch, list) or len(batch) < 2 or not isinstance(batch[1], list):
        return None
    stored = next((len(e) for e in batch[1] if isinstance(e, list) and e and e[0] == "BlockStored"), None)
    return ("array", len(batch), stored)


def to_extra(s: KvSummary) -> dict[str, Any]:
    """The run-level counters an observation carries (sorted keys)."""
    extra: dict[str, Any] = {
        "kv_event_batches": s.batches,
        "kv_events_block_stored": s.events["BlockStored"],
        "kv_events_block_removed": s.events["BlockRemoved"],
        "kv_events_all_blocks_cleared": s.events["AllBlocksCleared"],
        "kv_blocks_stored": s.blocks_stored,
        "kv_blocks_removed": s.blocks_removed,
        "kv_blocks_removed_unseen": s.removed_unknown,
        "kv_tokens_stored": s.tokens_stored,
        "kv_peak_resident_blocks": s.peak_resident,
        "kv_resident_blocks_at_end": s.resident_end,
    }
    if len(s.block_sizes) == 1:
        extra["kv_block_size"] = next(iter(s.block_sizes))
    return dict(sorted(extra.items()))
