"""Strict JSON read in chunks, one value at a time, with the line and column of each.

A workload can hold millions of requests: its ``requests`` array is decoded
item by item with the C decoder while the file is read in chunks, whatever the
layout (one request per line, pretty-printed, all on one line). Everything is
strict JSON (no NaN, no trailing commas, nothing after the document), and every
value's position is known, so an error names the line and column of the item
that is wrong. :class:`JsonStream` has the primitives; the workload reader
walks the top-level object with them.
"""

from __future__ import annotations

import json
import re
from typing import Any, TextIO

from .errors import InputError, json_problem
from .locations import _reject_constant

_WS = re.compile(r"[ \t\n\r]*")
CHUNK = 1 << 20
#: characters one value may span before the stream calls it broken (a
#: request with a million prompt token ids is ~8 MB of text)
MAX_VALUE = 1 << 28


class JsonStream:
    """A strict JSON reader over a text file, positioned between values.

    ``buf`` holds the unread window of the file from absolute character offset
    ``off``; positions handed out by :meth:`where` are 1-based line and column.
    Lines are counted incrementally from a cursor that only moves forward, so
    locating every item of a large array costs one pass over the text.
    """

    def __init__(self, fh: TextIO, path: Any) -> None:
        self.fh = fh
        self.path = path
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.off = 0  # absolute offset of buf[0]
        # line-counting cursor (absolute offsets): lines are known up to cursor
        self.cursor = 0
        self.line = 1
        self.line_start = 0
        self._decode = json.JSONDecoder(parse_constant=_reject_constant).raw_decode

    # -- reading ----------------------------------------------------------------
    def _fill(self, at_least: int = CHUNK) -> bool:
        """Append at least one more chunk; False at the end of the file."""
        if self.eof:
            return False
        chunk = self.fh.read(max(CHUNK, at_least))
        if not chunk:
            self.eof = True
            return False
        if not self.off and not self.buf and chunk[0] == "\ufeff":  # JSON text must not start with one (RFC 8259)
            raise self.error("invalid JSON: " + json_problem("Unexpected UTF-8 BOM"), 0)
        if self.pos >= CHUNK:  # drop the consumed text (after counting its lines)
            self.where(self.pos)
            self.buf = self.buf[self.pos:]
            self.off += self.pos
            self.pos = 0
        self.buf += chunk
        return True

    def peek(self) -> str:
        """Skip whitespace; the next character, or '' at the end of the file."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        """Consume one of ``chars`` (after whitespace), or fail naming ``what``."""
        c = self.peek()
        if not c or c not in chars:
            found = "the end of the file (truncated?)" if not c else repr(c)
            raise self.error(f"invalid JSON: expected {what}, found {found}", self.pos)
        self.pos += 1
        return c

    def value(self) -> Any:
        """Decode the value that starts here (call :meth:`peek` first)."""
        if self.pos >= len(self.buf) and not self.peek():
            raise self.error("invalid JSON: expected a value, found the end of the file (truncated?)", self.pos)
        while True:
            try:
                obj, end = self._decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # cut by the end of the window (the error sits at its end, or a
                # string runs past it): read on; otherwise the text is wrong
                cut = exc.pos >= len(self.buf) - 6 or exc.msg.startswith("Unterminated string")
                if cut and len(self.buf) - self.pos < MAX_VALUE and self._fill(len(self.buf) - self.pos):
                    continue
                raise self.error(f"invalid JSON: {json_problem(exc.msg)}", exc.pos) from None
            except RecursionError:
                raise self.error("invalid JSON: nested too deeply", self.pos) from None
            except ValueError as exc:  # NaN / Infinity
                raise self.error(f"invalid JSON: {exc}", self.pos) from None
            if end == len(self.buf) and self._fill():
                continue  # a number or literal cut by the chunk boundary
            self.pos = end
            return obj

    def key(self) -> str:
        """An object member's name and its ':'."""
        if self.peek() != '"':
            raise self.error("invalid JSON: expected a member name in double quotes", self.pos)
        name = self.value()
        self.expect(":", "':'")
        return name  # type: ignore[no-any-return]

    def at_end(self) -> None:
        """Nothing but whitespace may follow the document."""
        if self.peek():
            raise self.error("invalid JSON: unexpected content after the end of the document", self.pos)

    # -- positions ----------------------------------------------------------------
    def where(self, pos: int) -> tuple[int, int]:
        """Line and column (1-based) of buffer position ``pos``. Positions are
        asked for in reading order; one behind the cursor is reported at it."""
        target = max(self.off + pos, self.cursor)
        start = self.cursor - self.off
        end = target - self.off
        n = self.buf.count("\n", start, end)
        if n:
            self.line += n
            self.line_start = self.off + self.buf.rfind("\n", start, end) + 1
        self.cursor = target
        return self.line, target - self.line_start + 1

    def error(self, message: str, pos: int, json_path: str | None = None) -> InputError:
        line, col = self.where(min(pos, len(self.buf)))
        return InputError(self.path, message, line=line, column=col, json_path=json_path)
