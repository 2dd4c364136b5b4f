"""JSON through compiled libraries, with the bytes and the error messages tickgate has always had.

Writing: :func:`dumps_line` is ``json.dumps(value, separators=(",", ":"))``
byte for byte, written by orjson, for the values the hot writers produce
(workload lines, trace lines). orjson, not msgspec, because msgspec writes a
``set`` as an array in hash order where ``json.dumps`` (and orjson) refuse it:
nothing that reaches a file may depend on set order. orjson writes the same
text as the standard library except in three places, each handled here or by
the caller:

* strings outside printable ASCII: ``json.dumps`` escapes them (``\\u00e9``,
  ``\\u007f``), orjson writes UTF-8. The output is checked (one C pass) and
  such a value goes through the standard library;
* floats of magnitude below 1e-4 (``1e-05`` against orjson's ``0.00001``),
  NaN and infinities (``NaN`` against ``null``). Callers pass only floats for
  which :func:`plain_float` holds (they know where their floats are: a tick
  record's ``duration_ms``, a request's ``arrival_ms``), else they call
  :func:`stdlib_line`;
* values orjson refuses and the standard library writes (ints beyond 64 bits,
  non-str keys): :func:`dumps_line` hands them to the standard library.
  Types orjson writes and the standard library refuses (dataclasses, dates)
  are not built by any writer.

``tests/test_core_jsonio.py`` checks the equality on generated values.

Reading: :func:`loads` is the standard library's reading of a document,
decoded by msgspec wherever msgspec takes it (two to four times faster); large
documents are streamed by :mod:`tickgate.util.jsonstream`. :func:`location` turns
a byte offset msgspec reports into a line and column, :func:`split_error` its
message into tickgate's words.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

_encode = orjson.dumps
_decode = msgspec.json.Decoder().decode
#: msgspec refuses the text (RecursionError: nested deeper than it recurses)
_REFUSED = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)
#: ``json.dumps(value, separators=(",", ":"))``, with its one C encoder built per call
stdlib_line = json.JSONEncoder(separators=(",", ":")).encode


def plain_float(value: float) -> bool:
    """Whether orjson writes ``value`` exactly as ``json.dumps`` does: finite,
    and zero or at least 1e-4 in magnitude (both write the shortest
    round-trip digits, ``1e+16`` from 1e16 on)."""
    return math.isfinite(value) and (value == 0 or abs(value) >= 1e-4)


def dumps_line(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))``; every float in ``value``
    must satisfy :func:`plain_float` (the caller checks)."""
    try:
        out = _encode(value)
    except TypeError:
        return stdlib_line(value)  # the standard library's own error, or its text
    if out.isascii() and b"\x7f" not in out:
        return out.decode()
    return stdlib_line(value)


def loads(text: str | bytes, fallback: Callable[[Any], Any] = json.loads) -> Any:
    """``fallback(text)`` (``json.loads`` unless given), decoded by msgspec
    where msgspec takes the text. What msgspec refuses goes to ``fallback``:
    malformed text (so the error is the standard library's, with its words,
    line and column) and the values msgspec does not take (NaN and Infinity,
    which ``json.loads`` allows, 1e400, lone surrogate escapes). Where both
    take a text they build the same value (last duplicate key wins in both)."""
    try:
        return _decode(text)
    except _REFUSED:
        return fallback(text)


_BYTE = re.compile(r"\s*\(byte (\d+)\)$")


def location(data: bytes | memoryview, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of byte ``offset`` of ``data``."""
    offset = max(0, min(offset, len(data)))
    head = bytes(data[:offset])
    line_start = head.rfind(b"\n") + 1
    column = len(head[line_start:].decode("utf-8", "replace")) + 1
    return head.count(b"\n") + 1, column


def split_error(exc: msgspec.DecodeError) -> tuple[str, int | None]:
    """msgspec's message without its prefix and its ``(byte N)``, and N."""
    message = str(exc)
    for prefix in ("JSON is malformed: ", "MessagePack data is malformed: "):
        message = message.removeprefix(prefix)
    m = _BYTE.search(message)
    if m is None:
        return message, None
    return message[: m.start()], int(m.group(1))
