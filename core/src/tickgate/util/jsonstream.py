"""Strict JSON read in chunks by msgspec, a value or a window of array elements at a time.

Workloads and gate observations can hold millions of requests, so no document
is decoded whole: the file is read in 1 MiB chunks, its big array is decoded
about ``WINDOW`` bytes of elements per msgspec call (one C call for hundreds of
requests), everything else one member at a time. msgspec decodes every value
but cannot stream, so this module steps over the punctuation of the enclosing
objects and arrays, and finds where a value ends from msgspec's own
``trailing characters (byte N)`` error on the text that follows it.

A window is cut just after a ``}`` followed by ``,{``; it is used only if it
decodes on its own as a sequence of complete values, which proves the cut lies
between two elements (a cut inside a string or a nested value never decodes).

Where msgspec refuses a value the standard library reads it again: its
messages say what is wrong ("Expecting property name enclosed in double
quotes") and it accepts the strict-JSON values msgspec does not (numbers beyond
a double's range, lone surrogate escapes), so what is accepted and every
message are what ``json.loads`` gives. Everything is strict JSON (no NaN, no
trailing commas, nothing after the document, UTF-8), with no object naming a
member twice (:func:`tickgate.util.jsonio.unique_members` checks every decoded
value); a UTF-8 byte order mark before the document is skipped (Windows tools
write one; RFC 8259 lets a parser ignore it). Positions are computed only when
asked for (for an error): 1-based line and column, the column in characters.

The file is read once, front to back, through the one handle given: a pipe
(``<(zcat w.json.gz)``, a FIFO) streams as a file does.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import IO, Any

import msgspec

from .errors import InputError, json_problem
from .jsonio import JsonProblem, find_problem, json_key, refuse_duplicates, split_error, unique_members
from .locations import _reject_constant

__all__ = ["JsonStream", "json_key"]

_WS = re.compile(rb"[ \t\n\r]*")
#: a place where one array element (an object) may end and the next begin
_BOUNDARY = re.compile(rb"\}[ \t\n\r]*,[ \t\n\r]*\{")
CHUNK = 1 << 20
#: bytes of array elements decoded per msgspec call
WINDOW = 1 << 16
#: cut points tried for one window before its elements are read one by one
TRIES = 8
#: bytes one value may span before the stream calls it broken (a request with
#: a million prompt token ids is ~8 MB of text)
MAX_VALUE = 1 << 28
_decode = msgspec.json.Decoder().decode
_extent = msgspec.json.Decoder(msgspec.Raw).decode  # checks the syntax, builds nothing
_stdlib_decode = json.JSONDecoder(parse_constant=_reject_constant).raw_decode
#: msgspec refuses the value (RecursionError: nested deeper than it recurses)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


class JsonStream:
    """A strict JSON reader over a binary file, positioned between values.

    ``buf`` holds the unread window of the file from absolute byte offset
    ``off``; ``pos`` indexes ``buf``. Lines are counted from a cursor that
    moves forward as text is dropped or located, so locating an error deep in a
    large file costs one pass over the text before it.
    """

    def __init__(self, fh: IO[bytes], path: Any) -> None:
        self.fh = fh
        self.path = path
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.off = 0
        self.cursor = 0  # absolute offset up to which lines are counted
        self.line = 1
        self.line_start = 0
        self._batch = (0, 0)  # absolute offset and index of the latest batch's first element
        self._positions: list[tuple[int, int]] | None = None  # of its elements, when read one by one

    # -- reading ------------------------------------------------------------------
    def _fill(self, at_least: int = CHUNK) -> bool:
        """Append at least one more chunk; False at the end of the file."""
        if self.eof:
            return False
        first = not self.off and not self.buf
        chunk = self.fh.read(max(CHUNK, at_least, 3 if first else 0))
        if not chunk:
            self.eof = True
            return False
        if first and chunk.startswith(codecs.BOM_UTF8):
            # not part of the text: skipped, and lines and columns count from after it
            self.buf, self.pos = chunk, len(codecs.BOM_UTF8)
            self.cursor = self.line_start = self.pos
            return True
        if self.pos >= CHUNK:  # drop the consumed text (after counting its lines)
            self.where(self.pos)
            self.buf = self.buf[self.pos :]
            self.off += self.pos
            self.pos = 0
        self.buf += chunk
        return True

    def _more(self) -> bool:
        """Read on for a value cut by the end of the buffer (doubling, up to ``MAX_VALUE``)."""
        ahead = len(self.buf) - self.pos
        return ahead < MAX_VALUE and self._fill(ahead)

    def peek(self) -> bytes:
        """Skip whitespace; the next byte, or b'' at the end of the file."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]  # _WS always matches (maybe empty)
            if self.pos < len(self.buf):
                return self.buf[self.pos : self.pos + 1]
            if not self._fill():
                return b""

    def expect(self, chars: bytes, what: str, json_path: str | None = None) -> bytes:
        """Consume one of ``chars`` (after whitespace), or fail naming ``what``."""
        c = self.peek()
        if not c or c not in chars:
            found = "the end of the file (truncated?)" if not c else self._char()
            raise self.error(f"invalid JSON: expected {what}, found {found}", self.pos, json_path)
        self.pos += 1
        return c

    def _char(self) -> str:
        """The character at ``pos``, quoted for an error (or the error that it is not UTF-8)."""
        head = self.buf[self.pos : self.pos + 4]
        try:
            return repr(head.decode("utf-8")[:1])
        except UnicodeDecodeError as exc:
            if exc.start:
                return repr(head[: exc.start].decode("utf-8")[:1])
            if exc.end < len(head) or self.eof:
                raise self._not_utf8(self.pos) from None
            return repr(head.decode("utf-8", "replace")[:1])  # a character cut by the end of the buffer

    def _not_utf8(self, pos: int) -> InputError:
        return self.error(f"not UTF-8 text (byte {self.off + pos})", pos)

    def _end(self) -> int | None:
        """Where the value at ``pos`` ends (the offset of what follows it), read
        on as far as it goes; None where msgspec refuses it."""
        while True:
            try:
                _extent(memoryview(self.buf)[self.pos :])
            except RecursionError:
                return None
            except msgspec.DecodeError as exc:
                message, at = split_error(exc)
                if message == "trailing characters" and at is not None:
                    return self.pos + at - 1  # msgspec names the byte after the first one it refused
                if (
                    message == "Input data was truncated"
                    and len(self.buf) - self.pos < CHUNK
                    and self._more()
                ):
                    continue  # (past a chunk the standard library reads on: msgspec says
                    # "truncated" for a lone surrogate escape too, which must not read the whole file)
                return None
            if not self._more():  # a number or a literal may go on in the next chunk
                return len(self.buf)

    def value(self, json_path: str | None = None) -> Any:
        """Decode the value that starts here."""
        if not self.peek():
            raise self.error(
                "invalid JSON: expected a value, found the end of the file (truncated?)", self.pos, json_path
            )
        end = self._end()
        if end is not None:
            try:
                obj = _decode(memoryview(self.buf)[self.pos : end])
            except _DECODE_ERRORS:
                pass
            else:
                raw = self.buf[self.pos : end]
                if not unique_members(raw, obj):
                    self._refuse(raw, self.pos, json_path)
                self.pos = end
                return obj
        obj, self.pos = self._stdlib(json_path)
        return obj

    def _refuse(
        self, raw: bytes | str, start: int, json_path: str | None, first_index: int = 0, lead: int = 0
    ) -> None:
        """Raise the located error for a duplicate member in ``raw``, the text of
        the value at buffer position ``start`` (``lead``: characters put before
        it, the ``[`` of a window of elements from index ``first_index``)."""
        try:
            refuse_duplicates(raw, json_path or "$", first_index)
        except JsonProblem as exc:
            at = start + len(exc.doc[: exc.pos].encode()) - lead
            raise self.error(exc.msg, at, exc.json_path) from None

    def _stdlib(self, json_path: str | None) -> tuple[Any, int]:
        """The standard library's reading of the value at ``pos`` (msgspec
        refused it): the value and where it ends, or the located error in the
        standard library's words."""
        while True:
            text = self._text()
            try:
                obj, end = _stdlib_decode(text)
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(text) - 6 or exc.msg.startswith("Unterminated string")
                if cut and self._more():
                    continue
                at = self.pos + len(text[: exc.pos].encode())
                raise self.error(f"invalid JSON: {json_problem(exc.msg)}", at, json_path) from None
            except RecursionError:
                raise self.error("invalid JSON: nested too deeply", self.pos, json_path) from None
            except ValueError as exc:  # NaN / Infinity: located where it is
                found = find_problem(text, json_path or "$", constants=True, duplicates=False)
                if found is None:  # pragma: no cover - the walk finds what the decoder refused
                    raise self.error(f"invalid JSON: {exc}", self.pos, json_path) from None
                at = self.pos + len(text[: found[1]].encode())
                raise self.error(f"invalid JSON: {exc}", at, found[2]) from None
            if end == len(text) and self._more():
                continue  # a number or literal cut by the end of the buffer
            if not unique_members(text[:end], obj):
                self._refuse(text[:end], self.pos, json_path)
            return obj, self.pos + len(text[:end].encode())

    def _text(self) -> str:
        """The buffer from ``pos`` as text (a character cut by the end of the buffer left out)."""
        data = self.buf[self.pos :]
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.end == len(data) and not self.eof:
                return data[: exc.start].decode("utf-8")
            raise self._not_utf8(self.pos + exc.start) from None

    def skip(self, json_path: str | None = None, **names: str) -> None:
        """Step over the value that starts here (an array a window at a time;
        ``names``: how :meth:`elements` words its errors)."""
        if self.peek() == b"[":
            for _ in self.elements(json_path or "$", **names):
                pass
            return
        self.value(json_path)

    def key(self, json_path: str | None = None) -> str:
        """An object member's name and its ':'."""
        if self.peek() != b'"':
            raise self.error("invalid JSON: expected a member name in double quotes", self.pos, json_path)
        name = self.value(json_path)
        self.expect(b":", "':'", json_path)
        return name

    def _opens(self, opening: bytes, closing: bytes, what: str, json_path: str) -> bool:
        """Consume the opening bracket of ``what``; True (and past it) if it closes at once."""
        if self.peek() != opening:
            raise self.error(
                f"expected {what}, found {self._char() if self.peek() else 'nothing'}", self.pos, json_path
            )
        self.pos += 1
        if self.peek() == closing:
            self.pos += 1
            return True
        return False

    def members(self, json_path: str = "$") -> Iterator[str]:
        """Walk the object that starts here: yields each member's name with the
        stream at its value, which the caller consumes (:meth:`value`,
        :meth:`elements`, :meth:`members`, :meth:`skip`); ends after the
        closing brace. A name given twice is an error."""
        if self._opens(b"{", b"}", "an object", json_path):
            return
        seen: set[str] = set()
        while True:
            name = self.key(json_path)
            if name in seen:
                raise self.error(f"duplicate member {name!r}", self.pos, f"{json_path}.{json_key(name)}")
            seen.add(name)
            self.peek()
            yield name
            if self.expect(b",}", "',' or '}' after a member", json_path) == b"}":
                return

    def elements(
        self, json_path: str, item: str = "an element", array: str = "the array"
    ) -> Iterator[list[Any]]:
        """Decode the array that starts here, a batch of elements at a time;
        afterwards the stream is past its closing bracket. While a batch is
        being looked at, :meth:`element_position` locates its elements.
        ``item`` and ``array`` name them in errors ("a request", "the requests list")."""
        if self._opens(b"[", b"]", "an array", json_path):
            return
        index = 0
        while True:
            self._batch = (self.off + self.pos, index)
            self._positions = None
            batch, closed = self._window(json_path, index)
            if batch is None:
                batch, closed = self._one_by_one(json_path, index, item, array)
            yield batch
            if closed:
                return
            index += len(batch)

    def _window(self, json_path: str, index: int) -> tuple[list[Any] | None, bool]:
        """About ``WINDOW`` bytes of elements from ``pos`` in one msgspec call,
        and whether they close the array; (None, False) where no cut proves
        itself (then the caller reads them one by one). ``json_path``, ``index``:
        the array and the first element's index, for an error."""
        search = self.pos + WINDOW
        while True:
            m = _BOUNDARY.search(self.buf, search)
            if m is not None or len(self.buf) - self.pos > 4 * WINDOW or not self._fill():
                break
            search = self.pos + WINDOW  # _fill may have moved the buffer
        if m is None:
            return self._last_window(json_path, index)
        for _ in range(TRIES):
            raw = self.buf[self.pos : m.start() + 1]
            try:
                values = _decode(b"[" + raw + b"]")
            except _DECODE_ERRORS:
                m = _BOUNDARY.search(self.buf, m.end())
                if m is None:
                    break
                continue
            if not unique_members(raw, values):
                self._refuse(b"[" + raw + b"]", self.pos, json_path, index, 1)
            self.pos = m.end() - 1
            return values, False
        return None, False

    def _last_window(self, json_path: str, index: int) -> tuple[list[Any] | None, bool]:
        """The rest of the array when it ends inside the buffer."""
        if not self.eof and len(self.buf) - self.pos > 4 * WINDOW:
            return None, False
        text = b"[" + self.buf[self.pos :]
        try:
            _extent(text)
        except RecursionError:
            return None, False
        except msgspec.DecodeError as exc:
            message, at = split_error(exc)
            if message != "trailing characters" or at is None:
                return None, False
            try:
                values = _decode(text[: at - 1])
            except _DECODE_ERRORS:
                return None, False
            if not unique_members(text[: at - 1], values):
                self._refuse(text[: at - 1], self.pos, json_path, index, 1)
            self.pos += at - 2
            return values, True
        return None, False  # the array ends the file: not an element of an object

    def _one_by_one(self, json_path: str, index: int, item: str, array: str) -> tuple[list[Any], bool]:
        """The elements up to about ``WINDOW`` bytes on, each on its own (exact
        errors, values msgspec refuses), with their positions."""
        batch: list[Any] = []
        self._positions = positions = []
        stop = self.off + self.pos + WINDOW
        while True:
            if not self.peek():
                raise self.error(f"file ends before {array} is closed (truncated?)", self.pos, json_path)
            positions.append(self.where(self.pos))
            batch.append(self.value(f"{json_path}[{index + len(batch)}]"))
            if self.expect(b",]", f"',' or ']' after {item}", json_path) == b"]":
                return batch, True
            if self.off + self.pos >= stop:
                return batch, False

    def element_position(self, k: int) -> tuple[int, int]:
        """Line and column of element ``k`` of the batch :meth:`elements` just
        yielded (its elements are valid JSON: stepped over one by one)."""
        if self._positions is not None:  # read one by one: known
            return self._positions[k]
        start, _ = self._batch
        pos = start - self.off
        ws = _WS.match
        for _ in range(k):
            try:
                _extent(memoryview(self.buf)[pos:])
            except msgspec.DecodeError as exc:
                _, at = split_error(exc)
                pos += at - 1 if at else 0
            pos = ws(self.buf, pos + 1).end()  # type: ignore[union-attr]  # _WS always matches; past ','
        return self.where(pos)

    def at_end(self) -> None:
        """Nothing but whitespace may follow the document."""
        if self.peek():
            raise self.error("invalid JSON: unexpected content after the end of the document", self.pos)

    # -- positions ----------------------------------------------------------------
    def where(self, pos: int) -> tuple[int, int]:
        """Line and column (1-based) of buffer position ``pos``."""
        target = self.off + pos
        if target < self.cursor:  # behind the cursor: count back, the cursor stays
            rel = self.cursor - self.off
            n = self.buf.count(b"\n", pos, rel)
            if not n:
                return self.line, self._column(self.line_start, target)
            return self.line - n, self._column(self.off + self.buf.rfind(b"\n", 0, pos) + 1, target)
        start = self.cursor - self.off
        n = self.buf.count(b"\n", start, pos)
        if n:
            self.line += n
            self.line_start = self.off + self.buf.rfind(b"\n", start, pos) + 1
        self.cursor = target
        return self.line, self._column(self.line_start, target)

    def _column(self, line_start: int, target: int) -> int:
        head = self.buf[max(line_start - self.off, 0) : target - self.off]
        return (len(head.decode("utf-8", "replace")) if not head.isascii() else len(head)) + 1

    def error(self, message: str, pos: int, json_path: str | None = None) -> InputError:
        line, col = self.where(min(pos, len(self.buf)))
        return InputError(self.path, message, line=line, column=col, json_path=json_path)
