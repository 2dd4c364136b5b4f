"""Walk a JSON document one member at a time so a million-request array never
becomes a million-element list of dicts at once.

The C scanner of the standard library decodes each value (``scan_once``); this
module only steps over the punctuation of the enclosing objects and arrays,
so values are parsed exactly as ``json.loads`` would (strict: no NaN or
Infinity), and every error carries a line and column.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from ..errors import InputError, json_problem

_WS = re.compile(r"[ \t\n\r]*")
#: a place where one array element of objects may end and the next begin
_BOUNDARY = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")
#: characters of array text decoded in one call by :meth:`Scanner.items` with ``run``
RUN_CHARS = 1 << 16


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class Scanner:
    """A cursor over the text of one file."""

    def __init__(self, text: str, path: Any) -> None:
        self.text = text
        self.path = path
        self._scan = json.JSONDecoder(parse_constant=_reject_constant).scan_once

    def where(self, pos: int) -> tuple[int, int]:
        line = self.text.count("\n", 0, pos) + 1
        return line, pos - (self.text.rfind("\n", 0, pos) + 1) + 1

    def fail(self, pos: int, message: str, json_path: str | None = None) -> InputError:
        line, col = self.where(pos)
        return InputError(self.path, message, line=line, column=col, json_path=json_path)

    def skip(self, pos: int) -> int:
        return _WS.match(self.text, pos).end()  # type: ignore[union-attr]

    def value(self, pos: int, json_path: str) -> tuple[Any, int]:
        """Decode one JSON value starting at ``pos`` (after whitespace)."""
        try:
            return self._scan(self.text, pos)
        except StopIteration:
            raise self.fail(pos, "invalid JSON: expected a value", json_path) from None
        except json.JSONDecodeError as exc:
            raise self.fail(exc.pos, f"invalid JSON: {json_problem(exc.msg)}", json_path) from None
        except ValueError as exc:
            raise self.fail(pos, f"invalid JSON: {exc}", json_path) from None
        except RecursionError:
            raise self.fail(pos, "invalid JSON: nested too deeply", json_path) from None

    def expect(self, pos: int, char: str, what: str, json_path: str) -> int:
        pos = self.skip(pos)
        if self.text.startswith(char, pos):
            return pos + 1
        raise self.fail(pos, f"invalid JSON: expected {what}", json_path)

    def members(self, pos: int, json_path: str,
                handlers: dict[str, Callable[[int, str], int]]) -> tuple[dict[str, Any], int]:
        """Read the object at ``pos``. Keys in ``handlers`` are handed to their
        handler (called with the value's position and JSON path, returning the
        end position); all other members are decoded and returned."""
        pos = self.skip(pos)
        if not self.text.startswith("{", pos):
            raise self.fail(pos, "expected an object", json_path)
        out: dict[str, Any] = {}
        seen: set[str] = set()
        pos = self.skip(pos + 1)
        if self.text.startswith("}", pos):
            return out, pos + 1
        while True:
            pos = self.skip(pos)
            if not self.text.startswith('"', pos):
                raise self.fail(pos, "invalid JSON: expected a property name in double quotes", json_path)
            key, pos = self.value(pos, json_path)
            member = f"{json_path}.{key}"
            if key in seen:
                raise self.fail(pos, f"duplicate key {key!r}", member)
            seen.add(key)
            pos = self.skip(self.expect(pos, ":", "':'", member))
            handler = handlers.get(key)
            if handler is not None:
                pos = handler(pos, member)
            else:
                out[key], pos = self.value(pos, member)
            pos = self.skip(pos)
            if self.text.startswith(",", pos):
                pos += 1
                continue
            if self.text.startswith("}", pos):
                return out, pos + 1
            raise self.fail(pos, "invalid JSON: expected ',' or '}'", json_path)

    def items(self, pos: int, json_path: str, each: Callable[[Any, int, int], None],
              run: Callable[[list[Any]], bool] | None = None) -> int:
        """Decode the array at ``pos`` element by element: ``each(value, index, pos)``.

        With ``run``, about ``RUN_CHARS`` of elements at a time are first decoded
        in one C call and offered as a list; ``run`` returns False to decline
        (then those elements go through ``each`` one by one). A run ends just
        after a ``}`` followed by ``,{``; it is used only if it decodes on its
        own as a sequence of complete values, which proves the cut lies between
        two elements (a cut inside a string or a nested value never decodes).
        """
        pos = self.skip(pos)
        if not self.text.startswith("[", pos):
            raise self.fail(pos, "expected an array", json_path)
        pos = self.skip(pos + 1)
        if self.text.startswith("]", pos):
            return pos + 1
        index = 0
        scan = self._scan
        text = self.text
        ws = _WS.match
        declined = 0
        while True:
            limit = len(text)
            if run is not None and declined < 2:
                m = _BOUNDARY.search(text, pos + RUN_CHARS)
                if m is not None:
                    end = m.start() + 1
                    try:
                        values, stop = scan("[" + text[pos:end] + "]", 0)
                    except (StopIteration, ValueError, RecursionError):
                        values, stop = None, 0
                    if values is not None and stop == end - pos + 2:
                        if run(values):
                            index += len(values)
                            pos = m.end() - 1
                            continue
                        declined += 1
                    limit = end
            while True:
                try:
                    item, end = scan(text, pos)
                except (StopIteration, ValueError, RecursionError):
                    self.value(pos, f"{json_path}[{index}]")  # raises a located error
                    raise  # pragma: no cover
                each(item, index, pos)
                index += 1
                pos = ws(text, end).end()  # type: ignore[union-attr]
                char = text[pos:pos + 1]
                if char == ",":
                    pos = ws(text, pos + 1).end()  # type: ignore[union-attr]
                    if pos >= limit:
                        break
                    continue
                if char == "]":
                    return pos + 1
                raise self.fail(pos, "invalid JSON: expected ',' or ']'", json_path)

    def finish(self, pos: int) -> None:
        pos = self.skip(pos)
        if pos != len(self.text):
            raise self.fail(pos, "invalid JSON: extra data after the document")
