"""Reading and writing workload files.

A workload file is one JSON document (schema: ``schemas/workload.schema.json``)::

    {"version": 1, "block_size": 16, "requests": [
    {"id": "r0", "prompt_tokens": 64, "max_output_tokens": 8, "arrival_tick": 0},
    ...
    ]}

Any valid JSON layout is accepted. The layout above (header on the first
line, one request per line) is what :func:`write_workload` produces and what
:func:`read_workload` streams without holding the document in memory, with
errors that name the line. Requests must be in arrival order: replay streams
them into the engine.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import attrs

from .errors import InputError
from .jsonenc import chunk_encoder
from .locations import MAX_INT, _reject_constant, parse_json, read_text
from .model import Request
from .schemas import load_schema, validate

_INT_FIELDS = ("prompt_tokens", "max_output_tokens")
_OPTIONAL_INT = ("priority", "arrival_tick", "deadline_tick")
_OPTIONAL_NUM = ("arrival_ms", "deadline_ms")
_OPTIONAL_STR = ("tenant", "lane")
_KNOWN = frozenset(
    ("id", *_INT_FIELDS, *_OPTIONAL_INT, *_OPTIONAL_NUM, *_OPTIONAL_STR,
     "strict_deadline", "prefix_blocks", "prompt_token_ids")
)
MAX_TOKENS = 10_000_000


@attrs.frozen
class WorkloadHeader:
    version: int = 1
    block_size: int | None = None
    description: str | None = None
    source: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version}
        if self.description is not None:
            out["description"] = self.description
        if self.block_size is not None:
            out["block_size"] = self.block_size
        if self.source is not None:
            out["source"] = dict(self.source)
        return out


@attrs.define
class Workload:
    """A header plus a (possibly lazy, single-use) stream of requests."""

    header: WorkloadHeader
    requests: Iterable[Request]
    path: str | None = None


def _is_int(value: Any) -> bool:
    return type(value) is int and -MAX_INT <= value <= MAX_INT


def _fast_ok(item: Any) -> bool:
    """Cheap structural check mirroring the schema; the schema explains failures."""
    if type(item) is not dict or not _KNOWN.issuperset(item):
        return False
    rid = item.get("id")
    if type(rid) is not str or not rid:
        return False
    for key in _INT_FIELDS:
        v = item.get(key)
        if not _is_int(v) or v < 0 or v > MAX_TOKENS:
            return False
    if item["prompt_tokens"] < 1 or item["max_output_tokens"] < 1:
        return False
    for key in _OPTIONAL_INT:
        if key in item and (not _is_int(item[key]) or (key != "priority" and item[key] < 0)):
            return False
    for key in _OPTIONAL_NUM:
        if key in item:
            v = item[key]
            if type(v) not in (int, float) or not math.isfinite(v) or v < 0 or v > 1e15:
                return False
    for key in _OPTIONAL_STR:
        if key in item and (type(item[key]) is not str or not item[key]):
            return False
    if "strict_deadline" in item and type(item["strict_deadline"]) is not bool:
        return False
    for key in ("prefix_blocks", "prompt_token_ids"):
        if key in item and not _id_list_ok(item[key]):
            return False
    return True


def _id_list_ok(v: Any) -> bool:
    """A list of integers in 0..MAX_INT, checked at C speed (block-id lists are long)."""
    if type(v) is not list:
        return False
    if not v:
        return True
    return set(map(type, v)) == _ONLY_INT and min(v) >= 0 and max(v) <= MAX_INT


_ONLY_INT = {int}


def request_from_dict(item: Mapping[str, Any]) -> Request:
    """Build a Request from an already validated mapping."""
    pb = item.get("prefix_blocks")
    pt = item.get("prompt_token_ids")
    am = item.get("arrival_ms")
    dm = item.get("deadline_ms")
    return Request(
        id=item["id"],
        prompt_tokens=item["prompt_tokens"],
        max_output_tokens=item["max_output_tokens"],
        priority=item.get("priority", 0),
        arrival_tick=item.get("arrival_tick", 0),
        arrival_ms=float(am) if am is not None else None,
        tenant=item.get("tenant"),
        lane=item.get("lane"),
        deadline_tick=item.get("deadline_tick"),
        deadline_ms=float(dm) if dm is not None else None,
        strict_deadline=item.get("strict_deadline", False),
        prefix_blocks=tuple(pb) if pb is not None else None,
        prompt_token_ids=tuple(pt) if pt is not None else None,
    )


def request_to_dict(r: Request) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": r.id,
        "prompt_tokens": r.prompt_tokens,
        "max_output_tokens": r.max_output_tokens,
        "priority": r.priority,
        "arrival_tick": r.arrival_tick,
    }
    for key in ("arrival_ms", "tenant", "lane", "deadline_tick", "deadline_ms"):
        value = getattr(r, key)
        if value is not None:
            out[key] = value
    if r.strict_deadline:
        out["strict_deadline"] = True
    if r.prefix_blocks is not None:
        out["prefix_blocks"] = list(r.prefix_blocks)
    if r.prompt_token_ids is not None:
        out["prompt_token_ids"] = list(r.prompt_token_ids)
    return out


class _RequestChecker:
    """Validates requests one at a time: schema, unique ids, arrival order."""

    def __init__(self, path: Any) -> None:
        self.path = path
        full = load_schema("workload.schema.json")
        self.schema = {**full["$defs"]["request"], "$defs": full["$defs"]}
        self.seen: set[str] = set()
        self.last_key: tuple[float, int] | None = None
        self.timed: bool | None = None

    def check(self, item: Any, index: int, line: int | None) -> Request:
        if not _fast_ok(item):
            validate(item, self.schema, file=self.path, prefix=("requests", index), line=line)
            raise InputError(self.path, "invalid request", line=line,
                             json_path=f"$.requests[{index}]")  # pragma: no cover
        if item["prompt_tokens"] + item["max_output_tokens"] > MAX_TOKENS:
            raise self._error(f"prompt_tokens + max_output_tokens exceeds {MAX_TOKENS}", index, line)
        rid = item["id"]
        seen = self.seen
        if rid in seen:
            raise self._error(f"duplicate request id {rid!r}", index, line)
        seen.add(rid)
        am = item.get("arrival_ms")
        timed = am is not None
        if self.timed is None:
            self.timed = timed
        elif timed != self.timed:
            raise self._error("either every request has arrival_ms or none has", index, line)
        arrival = float(am) if timed else float(item.get("arrival_tick", 0))
        last = self.last_key
        if last is not None and arrival < last[0]:
            field = "arrival_ms" if timed else "arrival_tick"
            raise self._error(f"requests must be in arrival order: {field} {arrival:g} comes after {last[0]:g}",
                              index, line)
        self.last_key = (arrival, index)
        return request_from_dict(item)

    def _error(self, message: str, index: int, line: int | None) -> InputError:
        return InputError(self.path, message, line=line, json_path=f"$.requests[{index}]")


def _header_from(data: Mapping[str, Any], path: Any) -> WorkloadHeader:
    header_schema = dict(load_schema("workload.schema.json"))
    header_schema["properties"] = {**header_schema["properties"], "requests": {}}
    validate(data, header_schema, file=path, line=1)
    return WorkloadHeader(
        version=data["version"],
        block_size=data.get("block_size"),
        description=data.get("description"),
        source=data.get("source"),
    )


def read_workload(path: Path) -> Workload:
    """Open a workload file; requests are validated as they are streamed."""
    path = Path(path)
    try:
        fh = path.open("r", encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    with fh:
        try:
            first = fh.readline()
        except UnicodeDecodeError:
            raise InputError(path, "not UTF-8 text") from None
    stripped = first.rstrip()
    if stripped.startswith("{") and stripped.endswith('"requests": ['):
        header = _header_from(parse_json(stripped + "]}", path), path)
        return Workload(header, _utf8_guard(_stream_lines(path), path), str(path))
    data = parse_json(read_text(path, limit=1 << 31), path)
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object with version and requests, found {type(data).__name__}",
                         json_path="$")
    header = _header_from(data, path)
    requests = data.get("requests")
    if not isinstance(requests, list):
        found = "nothing" if requests is None else type(requests).__name__.replace("dict", "an object")
        raise InputError(path, f"expected a list of requests, found {found}", json_path="$.requests")
    checker = _RequestChecker(path)
    return Workload(header, (checker.check(item, i, None) for i, item in enumerate(requests)), str(path))


_DECODE = json.JSONDecoder(parse_constant=_reject_constant).decode


def _utf8_guard(requests: Iterator[Request], path: Path) -> Iterator[Request]:
    """Turn a decoding failure deep in the stream into a located error."""
    try:
        yield from requests
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (a line holds byte 0x{exc.object[exc.start]:02x})") from None


def _stream_lines(path: Path) -> Iterator[Request]:
    """Stream the one-request-per-line layout. The decoder is built once; a line
    that fails to decode is parsed again by :func:`parse_json` for its message."""
    checker = _RequestChecker(path)
    check = checker.check
    decode = _DECODE
    index = 0
    closed = False
    with path.open("r", encoding="utf-8") as fh:
        fh.readline()
        for lineno, raw in enumerate(fh, start=2):
            text = raw.strip()
            if not text:
                continue
            if closed:
                raise InputError(path, "unexpected content after the end of the document", line=lineno)
            if text == "]}":
                closed = True
                continue
            if text[-1] == ",":
                text = text[:-1]
            try:
                item = decode(text)
            except (ValueError, RecursionError):
                item = parse_json(text, path, line_offset=lineno - 1)
            yield check(item, index, lineno)
            index += 1
    if not closed:
        raise InputError(path, "file ends before the requests list is closed (truncated?)")


def workload_head(header: WorkloadHeader) -> str:
    """The first line of the streamable layout: the header, opening the requests list."""
    head = json.dumps(header.to_json(), sort_keys=False)
    return head[:-1] + ', "requests": [\n'


#: what closes the streamable layout
WORKLOAD_TAIL = "\n]}\n"


def write_requests(fh: Any, requests: Iterable[Request]) -> int:
    """Write the request lines of the streamable layout (no header, no tail)."""
    count = 0
    encode = chunk_encoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    write = fh.write
    join = "".join
    for r in requests:
        if count:
            write(",\n")
        write(join(encode(request_to_dict(r), 0)))
        count += 1
    return count


def write_workload(fh: Any, header: WorkloadHeader, requests: Iterable[Request]) -> int:
    """Write the streamable layout; returns the number of requests written."""
    fh.write(workload_head(header))
    count = write_requests(fh, requests)
    fh.write(WORKLOAD_TAIL)
    return count
