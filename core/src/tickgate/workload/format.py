"""Reading and writing workload files.

A workload file is one JSON document (schema: ``schemas/workload.schema.json``)::

    {"version": 1, "block_size": 16, "requests": [
    {"id": "r0", "prompt_tokens": 64, "max_output_tokens": 8, "arrival_tick": 0},
    ...
    ]}

Any valid JSON layout is accepted and streamed without holding the document
in memory (:mod:`tickgate.util.jsonstream`); errors name the line and column where
the offending request starts. The layout above (header on the first line, one
request per line) is what :func:`write_workload` produces. Requests must be in
arrival order: replay streams them into the engine.
"""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeGuard

import attrs

from ..interfaces.model import Request
from ..util.errors import InputError
from ..util.jsonio import dumps_line, plain_float, stdlib_line
from ..util.jsonstream import JsonStream, json_key
from ..util.locations import MAX_INT, Locations, open_binary
from ..util.schemas import load_schema, validate
from .block_runs import block_runs, expand_runs

_INT_FIELDS = ("prompt_tokens", "max_output_tokens")
_OPTIONAL_INT = ("priority", "arrival_tick", "deadline_tick")
_OPTIONAL_NUM = ("arrival_ms", "deadline_ms")
_OPTIONAL_STR = ("tenant", "lane")
_KNOWN = frozenset(
    (
        "id",
        *_INT_FIELDS,
        *_OPTIONAL_INT,
        *_OPTIONAL_NUM,
        *_OPTIONAL_STR,
        "strict_deadline",
        "prefix_blocks",
        "prefix_block_runs",
        "prompt_token_ids",
    )
)
MAX_TOKENS = 10_000_000


@attrs.frozen
class WorkloadHeader:
    version: int = 1
    block_size: int | None = None
    description: str | None = None
    source: Mapping[str, Any] | None = None
    #: closed-loop clients: at most this many requests in flight (None: open loop);
    #: the replay driver enforces it (:func:`tickgate.replay.engine.run`)
    max_concurrency: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version}
        if self.description is not None:
            out["description"] = self.description
        if self.block_size is not None:
            out["block_size"] = self.block_size
        if self.max_concurrency is not None:
            out["max_concurrency"] = self.max_concurrency
        if self.source is not None:
            out["source"] = dict(self.source)
        return out


@attrs.define
class Workload:
    """A header plus a (possibly lazy, single-use) stream of requests."""

    header: WorkloadHeader
    requests: Iterable[Request]
    path: str | None = None


def _is_int(value: Any) -> TypeGuard[int]:
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
    return not ("prefix_block_runs" in item and not _runs_ok(item["prefix_block_runs"]))


def _runs_ok(v: Any) -> bool:
    """``[[first, count], ...]`` with first ids in 0..MAX_INT and counts >= 1
    (where runs end and how many ids they hold: :meth:`_RequestChecker.check`)."""
    if type(v) is not list:
        return False
    for run in v:
        if type(run) is not list or len(run) != 2:
            return False
        first, count = run
        if (
            type(first) is not int
            or type(count) is not int
            or not 0 <= first <= MAX_INT
            or not 1 <= count <= MAX_INT
        ):
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
    if pb is None and "prefix_block_runs" in item:
        pb = expand_runs(item["prefix_block_runs"])
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
        n = len(r.prefix_blocks)
        try:
            runs = (
                block_runs(r.prefix_blocks) if 2 < n <= r.prompt_tokens else None
            )  # what readers accept as runs
        except TypeError:  # ids that are not ints (a reader plugin's): the list, as given
            runs = None
        if runs is not None and 2 * len(runs) < n:
            out["prefix_block_runs"] = runs  # the compact spelling, when it is one
        else:
            out["prefix_blocks"] = list(r.prefix_blocks)
    if r.prompt_token_ids is not None:
        out["prompt_token_ids"] = list(r.prompt_token_ids)
    return out


class _RequestChecker:
    """Validates requests one at a time: schema, unique ids, arrival order.

    ``locate(k)`` gives the line and column of the ``k``-th request of the
    batch being checked; it is asked only for an error."""

    def __init__(self, path: Any, locate: Callable[[int], tuple[int, int]]) -> None:
        self.path = path
        self.locate = locate
        full = load_schema("workload.schema.json")
        self.schema = {**full["$defs"]["request"], "$defs": full["$defs"]}
        self.seen: set[str] = set()
        self.last_key: tuple[float, int] | None = None
        self.timed: bool | None = None
        self.k = 0

    def check(self, item: Any, index: int, k: int) -> Request:
        self.k = k
        if not _fast_ok(item):
            line, column = self.locate(k)
            validate(
                item,
                self.schema,
                file=self.path,
                prefix=("requests", index),
                line=line,
                locations={f"$.requests[{index}]": (line, column)},
            )
            raise InputError(
                self.path, "invalid request", line=line, json_path=f"$.requests[{index}]"
            )  # pragma: no cover
        if "prefix_block_runs" in item and "prefix_blocks" in item:
            raise self._error(
                "prefix_blocks and prefix_block_runs spell the same ids: give one of them", index
            )
        if "prefix_block_runs" in item:
            self._check_runs(item, index)
        if item["prompt_tokens"] + item["max_output_tokens"] > MAX_TOKENS:
            raise self._error(f"prompt_tokens + max_output_tokens exceeds {MAX_TOKENS}", index)
        rid = item["id"]
        seen = self.seen
        if rid in seen:
            raise self._error(f"duplicate request id {rid!r}", index)
        seen.add(rid)
        am = item.get("arrival_ms")
        timed = am is not None
        if self.timed is None:
            self.timed = timed
        elif timed != self.timed:
            raise self._error("either every request has arrival_ms or none has", index)
        arrival = float(am) if timed else float(item.get("arrival_tick", 0))
        last = self.last_key
        if last is not None and arrival < last[0]:
            field = "arrival_ms" if timed else "arrival_tick"
            raise self._error(
                f"requests must be in arrival order: {field} {arrival:g} comes after {last[0]:g}", index
            )
        self.last_key = (arrival, index)
        return request_from_dict(item)

    def _check_runs(self, item: Mapping[str, Any], index: int) -> None:
        """What the schema cannot say about runs: ids stay in range, and a
        request has no more prefix blocks than prompt tokens (runs are expanded
        in memory, so a count of 10**15 must not get that far; a list is as long
        as its file allows, and writers only use runs within this rule)."""
        total = 0
        for k, (first, count) in enumerate(item["prefix_block_runs"]):
            if first + count - 1 > MAX_INT:
                raise self._error(
                    f"the run [{first}, {count}] ends past the largest block id {MAX_INT}",
                    index,
                    f".prefix_block_runs[{k}]",
                )
            total += count
        if total > item["prompt_tokens"]:
            raise self._error(
                f"{total} block ids, more than the {item['prompt_tokens']} prompt tokens they would cover",
                index,
                ".prefix_block_runs",
            )

    def _error(self, message: str, index: int, member: str = "") -> InputError:
        line, column = self.locate(self.k)
        return InputError(
            self.path, message, line=line, column=column, json_path=f"$.requests[{index}]{member}"
        )


def _header_from(
    data: Mapping[str, Any], path: Any, locations: Locations | None = None, *, complete: bool = True
) -> WorkloadHeader:
    """The header of a workload file, checked; not ``complete``: the members before
    the requests list of a file read once (``version`` may follow it)."""
    header_schema = dict(load_schema("workload.schema.json"))
    header_schema["properties"] = {**header_schema["properties"], "requests": {}}
    if not complete:
        header_schema["required"] = [k for k in header_schema["required"] if k != "version"]
    validate(data, header_schema, file=path, locations=locations or {"$": (1, 1)})
    return WorkloadHeader(
        version=data.get("version", 1),
        block_size=data.get("block_size"),
        description=data.get("description"),
        source=data.get("source"),
        max_concurrency=data.get("max_concurrency"),
    )


def read_workload(path: Path) -> Workload:
    """Open a workload file; requests are decoded and validated as they are streamed.

    Any JSON layout is read in chunks (see :mod:`tickgate.util.jsonstream`). The
    header must be known before the first request is replayed: when members
    follow the ``requests`` array (``json.dump(..., sort_keys=True)`` puts
    ``version`` last), a regular file is read twice, the first time only to
    collect them. Anything else (a pipe, ``<(zcat w.json.gz)``, a FIFO) is read
    once, as it streams (:mod:`tickgate.workload.piped`).
    """
    path = Path(path)
    if not _regular(path):
        from .piped import read_once

        return read_once(path)
    header, locations = _scan_header(path)
    return Workload(_header_from(header, path, locations), _stream_requests(path), str(path))


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file (one that can be read twice); a path
    that cannot be looked at counts as one: opening it reports why."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True


#: how errors name the requests array and its elements
_REQUESTS = {"item": "a request", "array": "the requests list"}


def _scan_header(path: Path) -> tuple[dict[str, Any], Locations]:
    """The top-level members other than ``requests``, with their positions."""
    header: dict[str, Any] = {}
    locations: Locations = {"$": (1, 1)}
    skip_requests = not _requests_close_the_document(path)
    with open_binary(path, "a workload file") as fh:
        s = JsonStream(fh, path)
        for name in _members(s, path):
            member = f"$.{json_key(name)}"
            locations[member] = s.where(s.pos)
            if name == "requests":
                header[name] = []  # streamed later; its place is all the header check needs
                if not skip_requests:
                    break
                s.skip(member, **_REQUESTS)
                continue
            header[name] = s.value(member)
    return header, locations


def _requests_close_the_document(path: Path) -> bool:
    """Whether the document ends with an array member (``...]}``): then
    ``requests`` (the only array the header allows) is its last member and
    nothing needs reading past it to know the header."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 256))
            tail = fh.read().rstrip(b" \t\r\n")
    except OSError:
        return True  # open_binary reports it
    return tail.endswith(b"}") and tail[:-1].rstrip(b" \t\r\n").endswith(b"]")


def _members(s: JsonStream, path: Path) -> Iterator[str]:
    """Walk the top-level object (:meth:`JsonStream.members`), then check that nothing follows it."""
    if s.peek() != b"{":
        if not s.peek():
            raise s.error("invalid JSON: Expecting value (the file is empty)", s.pos)
        raise InputError(
            path, f"expected a JSON object with version and requests, found {_kind(s.value())}", json_path="$"
        )
    yield from s.members("$")
    s.at_end()


def _kind(value: Any) -> str:
    return type(value).__name__.replace("dict", "an object").replace("NoneType", "null")


def _stream_requests(path: Path) -> Iterator[Request]:
    with open_binary(path, "a workload file") as fh:
        s = JsonStream(fh, path)
        for name in _members(s, path):
            if name != "requests":
                s.skip()  # header members were read by _scan_header
                continue
            yield from _requests_at(s, path)


def _requests_at(s: JsonStream, path: Path) -> Iterator[Request]:
    """The requests of the ``requests`` member whose value ``s`` is at, checked."""
    check = _RequestChecker(path, s.element_position).check
    if s.peek() != b"[":
        raise InputError(
            path, f"expected a list of requests, found {_kind(s.value())}", json_path="$.requests"
        )
    index = 0
    for batch in s.elements("$.requests", **_REQUESTS):
        for k, item in enumerate(batch):
            yield check(item, index, k)
            index += 1


def workload_head(header: WorkloadHeader) -> str:
    """The first line of the streamable layout: the header, opening the requests list."""
    head = json.dumps(header.to_json(), sort_keys=False)
    return head[:-1] + ', "requests": [\n'


#: what closes the streamable layout
WORKLOAD_TAIL = "\n]}\n"


def write_requests(fh: Any, requests: Iterable[Request]) -> int:
    """Write the request lines of the streamable layout (no header, no tail)."""
    count = 0
    write = fh.write
    for r in requests:
        if count:
            write(",\n")
        item = request_to_dict(r)
        write(dumps_line(item) if _plain_floats(r, item) else stdlib_line(item))
        count += 1
    return count


def _plain_floats(r: Request, item: dict[str, Any]) -> bool:
    """Whether every float of a request's line is one msgspec writes as the
    standard library does (:func:`tickgate.util.jsonio.plain_float`): its times,
    and id lists only when they hold ints (a reader plugin's may not)."""
    am, dm = r.arrival_ms, r.deadline_ms
    if (am is not None and not plain_float(am)) or (dm is not None and not plain_float(dm)):
        return False
    for key in ("prefix_blocks", "prompt_token_ids"):
        ids = item.get(key)
        if ids and set(map(type, ids)) != _ONLY_INT:
            return False
    return True


def write_workload(fh: Any, header: WorkloadHeader, requests: Iterable[Request]) -> int:
    """Write the streamable layout; returns the number of requests written."""
    fh.write(workload_head(header))
    count = write_requests(fh, requests)
    fh.write(WORKLOAD_TAIL)
    return count
