"""Server-sent-event framing for OpenAI-compatible token streams.

Three capture shapes are read, all common in practice:

* raw SSE as ``curl -N`` saves it: ``data: {...}`` lines, events separated by
  blank lines, ``data: [DONE]`` at the end. SSE comment lines (``: ...``) are
  ignored, except ``: recv_ms=<number>``, which stamps the next event with its
  receive time in ms since the request was sent (what a capture proxy writes);
* JSONL of bare chunk objects (one payload per line, no ``data:`` prefix);
* JSONL of timed wrappers ``{"recv_ms": <number>, "data": <chunk or "[DONE]">}``.

Framing is all this module does; :mod:`tickgate.readers.streams` turns the
events into per-request evidence.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import InputError
from ..util.jsonio import JsonProblem, loads

DONE = "[DONE]"
_RECV = re.compile(r"^:\s*recv_ms\s*=\s*([0-9.eE+-]+)\s*$")


@attrs.frozen
class Event:
    """One SSE event: its decoded payload (a chunk dict or :data:`DONE`),
    the line it started on and its receive time if the capture has one."""

    payload: Any
    line: int
    recv_ms: float | None = None


@attrs.frozen
class Framed:
    events: tuple[Event, ...]
    #: the capture ended inside an event (cut mid-way): line where it starts
    cut_at_line: int | None
    shape: str  # "sse" | "jsonl" | "timed-jsonl"


def _decode(text: str, path: Path | str, line: int, column: int, *, last: bool) -> Any | None:
    """Decode one payload; None means "cut off at the end of the file"."""
    if text.strip() == DONE:
        return DONE
    try:
        value = loads(text)
    except JsonProblem as exc:  # well-formed, so not cut off: a member given twice
        raise InputError(
            path,
            f"{exc.msg} in stream chunk",
            line=line,
            column=column + exc.colno - 1,
            json_path=exc.json_path,
        ) from None
    except json.JSONDecodeError as exc:
        if last:
            return None
        raise InputError(
            path, f"invalid JSON in stream chunk: {exc.msg}", line=line, column=column + exc.colno - 1
        ) from None
    except RecursionError:
        raise InputError(path, "stream chunk nested too deeply", line=line) from None
    if not isinstance(value, dict):
        raise InputError(
            path, f"stream chunk must be a JSON object, got {type(value).__name__}", line=line, column=column
        )
    return value


def frame(text: str, path: Path | str) -> Framed:
    """Split a capture into events (see the module docstring for the shapes)."""
    lines = text.split("\n")
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    if not first:
        raise InputError(path, "empty stream capture: expected 'data: {...}' lines or JSON chunk lines")
    if first.startswith("{"):
        return _frame_jsonl(lines, path)
    return _frame_sse(lines, path)


def _frame_jsonl(lines: list[str], path: Path | str) -> Framed:
    events: list[Event] = []
    cut = None
    shape = "jsonl"
    last_index = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        lineno = i + 1
        is_last = i == last_index  # a cut capture ends in a partial line
        value = _decode(raw, path, lineno, 1, last=is_last)
        if value is None:
            cut = lineno
            break
        recv = None
        if isinstance(value, dict) and "data" in value and "recv_ms" in value and "object" not in value:
            shape = "timed-jsonl"
            recv = _recv_ms(value["recv_ms"], path, lineno)
            inner = value["data"]
            if isinstance(inner, str):
                inner = _decode(inner, path, lineno, 1, last=False)
            elif not isinstance(inner, dict):
                raise InputError(
                    path, "'data' must be a chunk object or a string", line=lineno, json_path="$.data"
                )
            value = inner
        events.append(Event(value, lineno, recv))
    return Framed(tuple(events), cut, shape)


def _recv_ms(value: Any, path: Path | str, line: int) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise InputError(
            path,
            f"recv_ms must be a non-negative number of ms, got {value!r}",
            line=line,
            json_path="$.recv_ms",
        )
    return float(value)


def _frame_sse(lines: list[str], path: Path | str) -> Framed:
    events: list[Event] = []
    data: list[str] = []
    start = 0
    recv: float | None = None
    pending_recv: float | None = None
    cut = None
    col = 1
    last_nonblank = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)

    def flush(last: bool) -> bool:
        nonlocal data, recv
        if not data:
            return True
        value = _decode("\n".join(data), path, start, col, last=last)
        data = []
        if value is None:
            return False
        events.append(Event(value, start, recv))
        recv = None
        return True

    for i, raw in enumerate(lines):
        lineno = i + 1
        line = raw.rstrip("\r")
        if not line.strip():
            if not flush(last=i > last_nonblank):
                cut = start
                break
            continue
        if line.startswith(":"):
            m = _RECV.match(line)
            if m:
                try:
                    pending_recv = _recv_ms(float(m.group(1)), path, lineno)
                except ValueError:
                    raise InputError(path, "recv_ms annotation is not a number", line=lineno) from None
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            # engines send one "data:" line per event; a new data line after a
            # complete payload means the capture lost the blank separator
            if data and _complete_json("\n".join(data)):
                flush(last=False)
            if not data:
                start = lineno
                col = len(line) - len(value) + 1
                recv, pending_recv = pending_recv, None
            data.append(value)
        elif field in ("event", "id", "retry"):
            continue
        else:
            raise InputError(
                path,
                f"expected an SSE field ('data:', 'event:', 'id:') or a comment, got {line[:40]!r}",
                line=lineno,
                column=1,
            )
    else:
        if not flush(last=True):
            cut = start
    return Framed(tuple(events), cut, "sse")


def _complete_json(text: str) -> bool:
    if text.strip() == DONE:
        return True
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def looks_like_chunks(head: bytes) -> bool:
    """Cheap sniff shared by the SSE mirrors: OpenAI-style chunk payloads."""
    text = head.decode("utf-8", errors="replace").lstrip()
    if not (text.startswith(("data:", "{", ":"))):
        return False
    return bool(re.search(r'"object"\s*:\s*"(chat\.completion\.chunk|text_completion)"', text))
