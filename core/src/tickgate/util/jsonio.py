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

Duplicate members: msgspec, orjson and the standard library all keep the last
of two members of one name, so ``{"latency_ms": 40, "latency_ms": 900}`` would
be read as 900 and nobody told. Every decoded text is checked here, once, for
every reader: :func:`unique_members` proves from counts that no object of the
text names a member twice (every member has one ``:`` outside strings, so a text
whose ``:`` are as many as the decoded keys, or as the ``:`` of the decoded
value written again, lost none), at the cost of counting the ``:`` (a few % of
the decoding); where the counts do not prove it, :func:`find_problem` walks the
text and locates the duplicate for the error (:class:`JsonProblem`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from itertools import repeat
from typing import Any, TypeGuard, cast

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
    where msgspec takes the text, and refused with a :class:`JsonProblem`
    (a ``json.JSONDecodeError``, located) if an object names a member twice.
    What msgspec refuses goes to ``fallback``: malformed text (so the error is
    the standard library's, with its words, line and column) and the values
    msgspec does not take (NaN and Infinity, which ``json.loads`` allows, 1e400,
    lone surrogate escapes). Where both take a text they build the same value.
    A fallback's ``parse_constant`` that refuses NaN (a ``ValueError`` without a
    place) becomes a :class:`JsonProblem` at the NaN, with the fallback's words."""
    try:
        value = _decode(text)
    except _REFUSED:
        try:
            value = fallback(text)
        except json.JSONDecodeError:
            raise
        except ValueError as exc:  # a fallback that refuses NaN and Infinity: where the first is
            refuse_constant(text, str(exc))
            raise
    if type(value) is dict and len(value) == (text.count(":") if isinstance(text, str) else text.count(b":")):
        return value  # (the first count of unique_members, inline: one object per line of a trace)
    if not unique_members(text, value):
        refuse_duplicates(text)
    return value


class JsonProblem(json.JSONDecodeError):
    """Well-formed JSON that tickgate refuses (a duplicate member, NaN), located
    as the standard library locates a syntax error (``lineno``, ``colno``, from
    ``pos``) and by ``json_path``. ``msg`` is the whole message for the user
    (``duplicate member 'x'``; ``invalid JSON: NaN is not valid JSON``)."""

    def __init__(self, msg: str, doc: str, pos: int, json_path: str) -> None:
        super().__init__(msg, doc, pos)
        self.json_path = json_path

    def __reduce__(self) -> Any:  # the four arguments, so that it crosses a process boundary
        return type(self), (self.msg, self.doc, self.pos, self.json_path)


def json_key(name: str) -> str:
    """A member name as a JSON path step: ``.name``'s name, or quoted."""
    return name if name.isidentifier() else json.dumps(name)


def unique_members(raw: str | bytes, value: Any) -> bool:
    """Whether counting proves that no object of ``raw`` (the text ``value`` was
    decoded from) names a member twice; False says only that it did not prove it.

    Every member of an object has one ``:`` after its name; any other ``:`` is
    inside a string. So the ``:`` of ``raw`` are at least its members, which are
    at least the keys of ``value``, as many unless a member was dropped as a
    duplicate: the ``:`` of ``raw`` as many as the keys of ``value`` plus the
    ``:`` of its strings prove that none was. Counted at C speed for the top
    level (one object, or a list of objects: a window of requests, with the
    ``:`` of their string values); where that falls short (nested objects,
    ``:`` in nested strings) the decoded value is written again by orjson, whose
    ``:`` are exactly its keys and the ``:`` of its strings. Not proved either
    way: a text that spells a ``:`` as ``\\u003a`` (one more ``:`` decoded than
    written)."""
    colons = raw.count(b":") if isinstance(raw, bytes) else raw.count(":")
    if not colons:
        return True
    kind = type(value)
    if kind is dict:
        if len(value) == colons:  # no ':' in a string: nothing else to count
            return True
    elif kind is list and value and type(value[0]) is dict and set(map(type, value)) == _ONLY_DICTS:
        keys = sum(map(len, value))  # a window of requests: many objects of one shape
        if keys == colons:
            return True
        # the ':' of the string values of the top level, for the members whose first
        # value holds one (as every element's fingerprint does): counting fewer makes
        # this fall short, never prove wrongly, and then the next count decides
        said = 0
        for name, first in value[0].items():
            if type(first) is str and ":" in first:
                said += "".join(filter(_is_str, map(dict.get, value, repeat(name)))).count(":")
        if keys + said == colons and _no_colon_escape(raw):
            return True
    try:
        again = _encode(value)
    except TypeError:  # ints beyond 64 bits, lone surrogates, deep nesting: walk the text instead
        return False
    return again.count(b":") == colons and _no_colon_escape(raw)


def _no_colon_escape(raw: str | bytes) -> bool:
    """No ``\\u003a`` or ``\\u003A`` in ``raw`` (nor any other ``\\u003x``)."""
    if isinstance(raw, bytes):  # a byte is found at memchr speed, four bytes much slower
        return b"\\" not in raw or b"\\u003" not in raw
    return "\\" not in raw or "\\u003" not in raw


#: isinstance(v, str) at C speed, for filter
_is_str = cast("Callable[[Any], TypeGuard[str]]", str.__instancecheck__)
#: the standard library's string scanner (C): a JSON string's value and where it ends
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]  # not in typeshed
_ONLY_DICTS = {dict}


def refuse_duplicates(text: str | bytes, root: str = "$", first_index: int = 0) -> None:
    """Raise a :class:`JsonProblem` at the first member of ``text`` whose name its
    object already has (for a text :func:`unique_members` did not prove)."""
    doc = text.decode("utf-8", "surrogatepass") if isinstance(text, bytes) else text
    found = find_problem(doc, root, first_index=first_index)
    if found is not None:
        message, pos, json_path = found
        raise JsonProblem(message, doc, pos, json_path)


def refuse_constant(text: str | bytes, message: str) -> None:
    """Raise a :class:`JsonProblem` saying ``invalid JSON: {message}`` at the first
    NaN or Infinity of ``text``, if ``message`` is about one (``parse_constant``
    hooks name the constant first: ``NaN is not valid JSON``) and ``text`` has one."""
    if not message.startswith(tuple(_CONSTANTS)):
        return
    doc = text.decode("utf-8", "surrogatepass") if isinstance(text, bytes) else text
    try:
        found = find_problem(doc, constants=True, duplicates=False)
    except (ValueError, IndexError):  # not JSON up to the constant: no place to give
        return
    if found is not None:
        raise JsonProblem(f"invalid JSON: {message}", doc, found[1], found[2])


def _skip(text: str, pos: int) -> int:
    """``pos`` moved past whitespace."""
    while text[pos : pos + 1] in _WHITESPACE:
        pos += 1
    return pos


_WHITESPACE = frozenset((" ", "\t", "\n", "\r"))
#: a number or a literal (the text is known to decode: nothing finer is needed)
_SCALAR = re.compile(r"-?Infinity|NaN|true|false|null|-?[0-9][0-9.eE+-]*")
_CONSTANTS = frozenset(("NaN", "Infinity", "-Infinity"))


def find_problem(
    text: str, root: str = "$", *, constants: bool = False, duplicates: bool = True, first_index: int = 0
) -> tuple[str, int, str] | None:
    """The first member of ``text`` whose object already has its name (unless not
    ``duplicates``; with ``constants``, the first NaN or Infinity too), as
    (message, offset of its first character, JSON path), or None. ``root`` names
    the value, ``first_index`` the index of its first element if it is an array
    (a window of a longer array). ``text`` is JSON that decodes: this walks it
    once, without recursion, only to locate an error."""
    ws = _skip
    stack: list[list[Any]] = []  # [path, names seen] for an object, [path, index] for an array
    path = root
    pos = ws(text, 0)
    while True:
        c = text[pos : pos + 1]
        if c in ("{", "["):
            pos = ws(text, pos + 1)
            if text[pos : pos + 1] in ("}", "]"):
                pos += 1
            elif c == "{":
                stack.append([path, set()])
                found, path, pos = _member(text, pos, stack[-1], duplicates)
                if found is not None:
                    return found
                continue
            else:
                index = first_index if not stack else 0
                stack.append([path, index])
                path = f"{path}[{index}]"
                continue
        elif c == '"':
            pos = _scanstring(text, pos + 1, False)[1]
        else:
            m = _SCALAR.match(text, pos)
            if m is None:
                return None
            if constants and m.group() in _CONSTANTS:
                return f"{m.group()} is not valid JSON", pos, path
            pos = m.end()
        while True:  # after a value: close what it ends, or go on to the next one
            if not stack:
                return None
            pos = ws(text, pos)
            c = text[pos : pos + 1]
            pos += 1
            frame = stack[-1]
            if c != ",":
                stack.pop()
            elif type(frame[1]) is set:
                found, path, pos = _member(text, ws(text, pos), frame, duplicates)
                if found is not None:
                    return found
                break
            else:
                frame[1] += 1
                path = f"{frame[0]}[{frame[1]}]"
                break
        pos = ws(text, pos)


def _member(
    text: str, pos: int, frame: list[Any], duplicates: bool
) -> tuple[tuple[str, int, str] | None, str, int]:
    """Read the name at ``pos`` of the object ``frame`` and its ``:``: the
    problem if the object has that name already (when looking for
    ``duplicates``), the member's path, and where its value starts."""
    name, end = _scanstring(text, pos + 1, False)
    path = f"{frame[0]}.{json_key(name)}"
    if duplicates and name in frame[1]:
        return (f"duplicate member {name!r}", pos, path), path, end
    frame[1].add(name)
    return None, path, _skip(text, _skip(text, end) + 1)  # past the ':'


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
