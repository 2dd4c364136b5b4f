"""The ``mooncake`` reader: Mooncake-style JSONL traces (one request per line).

Each line is an object with ``timestamp`` (ms), ``input_length``,
``output_length`` and ``hash_ids`` (ids of the prompt's KV blocks, one per
``block_size`` tokens; 512 in the Mooncake FAST'25 release, often 16 in
synthetic traces), and optionally ``priority`` (an integer, lower first, as
in vLLM) and ``session_id``.

``hash_ids`` become ``prefix_blocks`` (with the workload's ``block_size``)
so requests that share a leading run of ids share a cacheable prefix. The
reader checks that there is exactly one id per block of the prompt,
``ceil(input_length / block_size)``: a mismatch almost always means the
wrong ``--block-size``, which would silently change every prefix-cache hit.
``session_id`` names a conversation, not a tenant; it is not mapped (a
segment per conversation would make the report as long as the trace).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..interfaces import FilePart
from ..interfaces.model import Request
from ..util.errors import InputError
from ..util.jsonio import loads
from ..util.locations import MAX_INT, json_error, open_text
from ..workload.block_runs import run_starts
from ..workload.format import MAX_TOKENS
from ._common import ArrivalOrder, TraceReader

_DECODER = json.JSONDecoder()


def _decode(raw: str) -> Any:
    return loads(raw, _DECODER.decode)


def _reject(path: Path, line: int, message: str) -> InputError:
    return InputError(path, message, line=line)


def _first_timestamp(path: Path) -> float | None:
    """The first row's timestamp, or ``None`` if it has none (then the part
    holding that row fails on it, and that error is the one reported)."""
    with open_text(path, "a trace file") as fh:
        for raw in fh:
            if raw.strip():
                try:
                    ts = _decode(raw.rstrip("\r\n")).get("timestamp")
                except (ValueError, RecursionError, AttributeError):
                    return None
                return ts if type(ts) in (int, float) else None
    return None


def _count(path: Path, line: int, obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if type(value) is not int:
        if type(value) is float and value.is_integer():
            value = int(value)
        else:
            what = "missing" if value is None else f"found {json.dumps(value)[:40]}"
            raise _reject(path, line, f"{key}: expected a whole number of tokens, {what}")
    if not 0 <= value <= MAX_TOKENS:
        raise _reject(path, line, f"{key}: expected 0..{MAX_TOKENS} tokens, found {value}")
    return value


class MooncakeReader(TraceReader):
    name = "mooncake"
    description = (
        "Mooncake-style JSONL (timestamp ms, input/output_length, hash_ids); --block-size, default 512."
    )
    id_prefix = "mc"
    default_block_size = 512
    file_kind = "JSONL"

    reads_parts = True

    def read(self, path: Path, options: Mapping[str, Any]) -> Iterator[Request]:
        self.start(path, options)
        self.order = ArrivalOrder(path, "timestamp")
        with open_text(path, "a trace file") as fh:
            yield from self._rows(path, fh, 1, None)
        if (
            self.source["rows"] == 0
        ):  # like the CSV readers' missing header: a truncated download, not a trace
            raise InputError(path, "empty file: expected one JSON object per line", line=1)

    def read_part(self, path: Path, options: Mapping[str, Any], part: FilePart) -> Iterator[Request]:
        self.start(path, options)
        # arrival_ms counts from the file's first row, wherever the part starts
        self.order = ArrivalOrder(
            path, "timestamp", origin=None if part.start == 0 else _first_timestamp(path)
        )
        with open_text(path, "a trace file") as fh:
            fh.seek(part.start)  # a line start: a clean point for the UTF-8 decoder
            yield from self._rows(path, fh, part.first_line, part.stop_line)

    def join_parts(self, path: Path, first: Any, second: Any, second_failed: bool) -> None:
        super().join_parts(path, first, second, second_failed)
        if not second_failed and self.source["rows"] == 0:
            raise InputError(path, "empty file: expected one JSON object per line", line=1)

    def _rows(self, path: Path, fh: Any, first_line: int, stop_line: int | None) -> Iterator[Request]:
        """The requests of the rows from line ``first_line`` (``fh`` is there) to
        ``stop_line`` (excluded; ``None``: the end of the file)."""
        block = self.source["block_size"]
        order = self.order
        assert order is not None
        decode = _decode
        rows = requests = 0
        for line, raw in enumerate(fh, start=first_line):
            if line == stop_line:
                break
            if not raw.strip():
                continue
            rows += 1
            try:
                # without its line break, so an error at the end of a cut row
                # points at the end of that row, not at column 1
                obj = decode(raw.rstrip("\r\n"))
            except (ValueError, RecursionError) as exc:  # RecursionError: a line of 100k '['
                raise json_error(path, exc, first_line=line) from None
            if type(obj) is not dict:
                raise _reject(path, line, f"expected a JSON object per line, found {type(obj).__name__}")
            ts: Any = obj.get("timestamp")  # a JSON value, checked here
            if type(ts) not in (int, float) or not (0 <= ts <= MAX_INT):
                what = "missing" if ts is None else f"found {json.dumps(ts)[:40]}"
                raise _reject(path, line, f"timestamp: expected milliseconds >= 0, {what}")
            order.check(ts, line)
            prompt = _count(path, line, obj, "input_length")
            output = _count(path, line, obj, "output_length")
            ids = obj.get("hash_ids")
            if type(ids) is not list:
                what = "missing" if ids is None else f"found {type(ids).__name__}"
                raise _reject(path, line, f"hash_ids: expected a list of block ids, {what}")
            blocks = tuple(ids)
            if blocks:
                if [*map(type, blocks)].count(int) != len(blocks):
                    raise _reject(path, line, "hash_ids: expected non-negative integer block ids")
                # one run (a synthetic trace's every row): its ends are its extremes;
                # the writer asks for the same runs next (blockruns keeps them)
                if run_starts(blocks) == [0]:
                    low, high = blocks[0], blocks[-1]
                else:
                    low, high = min(blocks), max(blocks)
                if low < 0 or high > MAX_INT:
                    raise _reject(path, line, "hash_ids: expected non-negative integer block ids")
            need = -(-prompt // block)
            if len(ids) != need:
                raise _reject(
                    path,
                    line,
                    (
                        f"hash_ids has {len(ids)} ids but input_length {prompt} needs {need} at block size "
                        f"{block}; is --block-size right? (the Mooncake release uses 512)"
                    ),
                )
            priority = obj.get("priority", 0)
            if type(priority) is not int or not -MAX_INT <= priority <= MAX_INT:
                raise _reject(path, line, f"priority: expected an integer, found {json.dumps(priority)[:40]}")
            if prompt == 0 or output == 0:
                self.skipped.add("zero input_length" if prompt == 0 else "zero output_length", line)
                self.progress(rows, requests)
                continue
            requests += 1
            self.progress(rows, requests)
            origin = order.origin
            assert origin is not None  # order.check set it
            yield Request(
                id=self.request_id(line),
                prompt_tokens=prompt,
                max_output_tokens=output,
                priority=priority,
                arrival_ms=float(ts - origin),
                prefix_blocks=blocks,
            )
        self.progress(rows, requests)
