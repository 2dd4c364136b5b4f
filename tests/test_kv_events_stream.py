"""KV events read as a stream (issue 38): a capture of any size is read chunk by chunk in bounded
memory, with the same batches, summary and errors (byte offsets in the whole file) as when the
bytes are decoded at once, whatever the chunk size."""

from __future__ import annotations

import io
import json
import random
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from conftest import FIXTURES, run_cli
from tickgate import AllBlocksCleared, BlockRemoved, BlockStored, KvEventWriter
from tickgate.readers import kv_events
from tickgate.readers.kv_events import decode_all, decode_file, summarize, summarize_file
from tickgate.util.errors import InputError

REAL_KV = FIXTURES / "realdata/kv_events"
OLD_LIMIT = 64 * 1024 * 1024  # the whole-file reader's limit before issue 38
CHUNKS = (1, 7, 64, 1000, 1 << 20)


def _capture() -> bytes:
    """A fleet-like capture: seeded batches of every event kind over four named replicas, then
    the recorded vLLM and SGLang payloads (map and array encodings, bytes hashes)."""
    rng = random.Random(38)
    fh = io.BytesIO()
    writer = KvEventWriter(fh)
    held: dict[str, list[int]] = {}
    for step in range(300):
        replica = f"replica-{rng.randrange(4)}"
        mine = held.setdefault(replica, [])
        events: list[object] = []
        for _ in range(rng.randrange(1, 6)):
            roll = rng.random()
            if roll < 0.5:
                hashes = tuple(rng.getrandbits(64) for _ in range(rng.randrange(1, 4)))
                mine += hashes
                events.append(BlockStored(hashes, None, 16 * len(hashes), 16))
            elif roll < 0.97 and mine:
                events.append(BlockRemoved((mine.pop(rng.randrange(len(mine))),)))
            elif roll >= 0.97:
                mine.clear()
                events.append(AllBlocksCleared())
        writer.write_batch(step / 10, events, rng.randrange(2), replica)
    return fh.getvalue() + b"".join((REAL_KV / n).read_bytes() for n in sorted(REAL_KV.glob("*.msgpack")))


def _error(fn: Callable[..., object], *args: object) -> str:
    """The error ``fn(*args)`` raises (a generator: as it is run through)."""
    with pytest.raises(InputError) as exc:
        result = fn(*args)
        if isinstance(result, Iterator):
            list(result)
    return str(exc.value)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_chunked_reading_gives_the_batches_and_summary_of_the_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    data = _capture()
    path = tmp_path / "events.msgpack"
    path.write_bytes(data)
    whole = list(decode_all(data, path))
    monkeypatch.setattr(kv_events, "CHUNK_BYTES", chunk)
    assert list(decode_file(path)) == whole
    assert len(whole) > 300 and whole[0][0] == 0
    assert summarize_file(path) == summarize(data, path)


def _corrupt(data: bytes) -> dict[str, bytes]:
    offsets = [o for o, _ in decode_all(data, "x")]
    mid = offsets[len(offsets) // 2]
    ext = msgspec.msgpack.encode([0.0, [msgspec.msgpack.Ext(1, b"xy")], 0])
    return {
        "truncated in the last batch": data[:-3],
        "truncated in a middle batch": data[: mid + 5],
        "a byte msgpack never uses": data[:mid] + b"\x94\xc1" + data[mid + 2 :],
        "an ext value": data[:mid] + ext + data[mid:],
        "a batch that is not one": data[:mid] + msgspec.msgpack.encode("x") + data[mid:],
        "nested too deep": data[:mid] + b"\x91" * 100_000 + b"\x00" + data[mid:],
    }


@pytest.mark.parametrize("chunk", CHUNKS)
def test_chunked_reading_fails_as_the_whole_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    for what, data in _corrupt(_capture()).items():
        path = tmp_path / "bad.msgpack"
        path.write_bytes(data)
        whole = _error(summarize, data, path)
        with monkeypatch.context() as m:
            m.setattr(kv_events, "CHUNK_BYTES", chunk)
            streamed = _error(summarize_file, path)
        assert streamed == whole, what
        assert "byte" in whole, what


def test_errors_name_the_byte_in_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _capture()
    offsets = [o for o, _ in decode_all(data, "x")]
    path = tmp_path / "cut.msgpack"
    path.write_bytes(data[: offsets[200] + 5])
    monkeypatch.setattr(kv_events, "CHUNK_BYTES", 64)
    assert _error(decode_file, path) == (
        f"{path}: msgpack data ends inside the object that starts at byte {offsets[200]} "
        f"(the file ends at byte {offsets[200] + 5}): truncated?"
    )
    path.write_bytes(b"")
    assert _error(summarize_file, path).endswith("empty file: expected msgpack KV event batches")


def _big_capture(path: Path, size: int) -> tuple[int, bytes]:
    """A capture of ``size`` bytes or more, cheap to write and to replay: each batch stores one
    1 MB bytes hash and the next removes it, so the file's size is in its hashes."""
    pair = b"".join(
        msgspec.msgpack.encode([float(i), [ev], 0])
        for i, ev in enumerate(
            (
                {"type": "BlockStored", "block_hashes": [b"h" * 1_000_000], "parent_block_hash": None,
                 "token_ids": [1] * 16, "block_size": 16, "lora_id": None, "medium": "GPU"},
                {"type": "BlockRemoved", "block_hashes": [b"h" * 1_000_000], "medium": "GPU"},
            )
        )
    )
    count = size // len(pair) + 1
    with open(path, "wb") as fh:
        for _ in range(count):
            fh.write(pair)
    return count, pair


def test_a_capture_above_the_old_limit_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.msgpack"
    pairs, pair = _big_capture(path, OLD_LIMIT + 1)
    assert path.stat().st_size > OLD_LIMIT
    tracemalloc.start()
    try:
        s = summarize_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert s.batches == 2 * pairs and s.blocks_stored == s.blocks_removed == pairs
    assert s.peak_resident == 1 and s.resident_end == 0 and s.removed_unknown == 0
    assert peak < 16 * 1024 * 1024, peak  # a chunk and a batch or two, not the file's 64+ MB
    assert summarize(pair * 3, path).batches == 6  # the same batches read at once


def test_normalize_reads_a_capture_above_the_old_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.msgpack"
    pairs, _ = _big_capture(path, OLD_LIMIT + 1)
    out = tmp_path / "obs.json"
    result = run_cli("normalize", str(path), "-o", str(out))
    assert result.returncode == 0, result.stderr
    extra = json.loads(out.read_text())["run"]["aggregates"]["extra"]
    assert extra["kv_event_batches"] == 2 * pairs and extra["kv_peak_resident_blocks"] == 1


def _stored(hashes: list[object], tokens: list[object]) -> bytes:
    event = ["BlockStored", hashes, None, tokens, 16, None, "GPU"]
    return msgspec.msgpack.encode([0.0, [event], 0])


@pytest.mark.parametrize(
    ("hashes", "tokens", "refused"),
    [
        ([1, b"\x01" * 32], [1, 2], None),
        ([1], [True, 2], None),  # a bool is an int to the token check (isinstance), as before
        ([True], [1], "block_hashes must be a list of ints or bytes"),  # but never a hash
        (["x"], [1], "block_hashes must be a list of ints or bytes"),
        ([1], [1.0], "token_ids must be a list of ints"),
        ([1], ["1"], "token_ids must be a list of ints"),
    ],
)
def test_value_checks_by_type(hashes: list[object], tokens: list[object], refused: str | None) -> None:
    data = _stored(hashes, tokens)
    if refused is None:
        assert summarize(data, "x").blocks_stored == len(hashes)
    else:
        assert refused in _error(summarize, data, "x")
