"""Helpers every backend mirror uses: reading engine files (which are not
always strict JSON), typed field access with located errors, and building the
neutral observation document.

Engine files are foreign data: a field of the wrong type is an
:class:`~tickgate.util.errors.InputError` naming the file, the line (for JSONL) and
the JSON path, never a ``KeyError`` traceback. Non-finite numbers (Python's
``json.dumps`` writes bare ``Infinity``/``NaN``) are accepted on input but never
reach an output file: readers drop them with a note.
"""

from __future__ import annotations

import codecs
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..util.errors import InputError
from ..util.jsonio import loads
from ..util.locations import MAX_DOCUMENT_BYTES, json_error, read_bytes as bounded_bytes, reading

HEAD_BYTES = 64 * 1024
#: engine outputs with per-request arrays get big; still bounded
MAX_NATIVE_BYTES = 4 * MAX_DOCUMENT_BYTES


def read_bytes(path: Path, *, limit: int = MAX_NATIVE_BYTES) -> bytes:
    """The bytes of an engine file, at most ``limit`` (a pipe too: read once, bounded)."""
    return bounded_bytes(path, limit=limit)


def read_head(path: Path) -> bytes:
    """The first bytes of ``path`` (for ``sniff``), after a UTF-8 byte order mark
    if it starts with one (Excel and other Windows tools write one)."""
    with reading(path), path.open("rb") as fh:
        return fh.read(HEAD_BYTES).removeprefix(codecs.BOM_UTF8)


def read_text(path: Path, *, limit: int = MAX_NATIVE_BYTES) -> str:
    """The text of ``path``, UTF-8, a leading byte order mark dropped."""
    data = read_bytes(path, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start})") from None


def head_text(head: bytes) -> str:
    return head.decode("utf-8", errors="replace")


def parse_engine_json(text: str, path: Path | str, *, line: int | None = None) -> Any:
    """JSON as engines write it: bare ``Infinity``/``-Infinity``/``NaN`` allowed;
    a member given twice in one object refused. ``line``: the line of ``path``
    that ``text`` is (JSONL)."""
    try:
        return loads(text)
    except (ValueError, RecursionError) as exc:
        raise json_error(path, exc, first_line=line) from None


def load_engine_json(path: Path) -> Any:
    text = read_text(path)
    if not text.strip():
        raise InputError(path, "empty file: expected a JSON document")
    return parse_engine_json(text, path)


def iter_json_lines(path: Path, text: str | None = None) -> Iterator[tuple[int, Any]]:
    """(line number, value) for every non-blank line of a JSONL file."""
    text = read_text(path) if text is None else text
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            yield lineno, parse_engine_json(raw, path, line=lineno)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Fields:
    """Typed access to one JSON object of an engine file, with located errors.

    ``path``/``line`` locate the file (and JSONL line); ``prefix`` is the JSON
    path of the object. Non-finite numbers read as absent and are noted.
    """

    def __init__(
        self,
        obj: Any,
        path: Path | str,
        *,
        line: int | None = None,
        prefix: str = "$",
        notes: list[str] | None = None,
    ) -> None:
        if not isinstance(obj, dict):
            raise InputError(path, f"expected a JSON object, got {_type(obj)}", line=line, json_path=prefix)
        self.obj = obj
        self.path = path
        self.line = line
        self.prefix = prefix
        self.notes = notes if notes is not None else []

    def where(self, key: str | int) -> str:
        return f"{self.prefix}[{key}]" if isinstance(key, int) else f"{self.prefix}.{key}"

    def fail(self, key: str, message: str) -> InputError:
        return InputError(self.path, message, line=self.line, json_path=self.where(key))

    def has(self, key: str) -> bool:
        return self.obj.get(key) is not None

    def _typed(self, key: str, required: bool, what: str, accepts: Callable[[Any], bool], quote: bool) -> Any:
        """The value at ``key``, None when absent (an error when ``required``), an
        error saying ``what`` was expected when ``accepts`` refuses it (with the
        value shortened when ``quote``)."""
        v = self.obj.get(key)
        if v is None:
            if required:
                raise self.fail(key, f"is required ({what})")
            return None
        if not accepts(v):
            raise self.fail(
                key,
                f"expected {what}, got {_type(v)} {_short(v)}"
                if quote
                else f"expected {what}, got {_type(v)}",
            )
        return v

    def number(self, key: str, *, required: bool = False, minimum: float | None = 0.0) -> float | None:
        v = self._typed(key, required, "a number", is_number, True)
        if v is None:
            return None
        if not math.isfinite(v):
            self.notes.append(f"{self.where(key)} is {v}; ignored")
            return None
        if minimum is not None and v < minimum:
            raise self.fail(key, f"expected a number >= {minimum:g}, got {v}")
        return float(v)

    def count(self, key: str, *, required: bool = False) -> int | None:
        v = self.number(key, required=required)
        if v is None:
            return None
        raw = self.obj[key]
        if type(raw) is int:
            return raw  # exact: a float holds integers only up to 2**53 (aiperf's ns timestamps are ~1.8e18)
        if v != int(v):
            raise self.fail(key, f"expected a whole count, got {v}")
        return int(v)

    def string(self, key: str, *, required: bool = False) -> str | None:
        return self._typed(key, required, "a string", _is_str, True)

    def sub(self, key: str, *, required: bool = False) -> Fields | None:
        v = self._typed(key, required, "an object", _is_dict, False)
        if v is None:
            return None
        return Fields(v, self.path, line=self.line, prefix=self.where(key), notes=self.notes)

    def array(self, key: str) -> list[Any] | None:
        return self._typed(key, False, "an array", _is_list, False)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def _is_list(v: Any) -> bool:
    return isinstance(v, list)


def not_this_format(
    path: Path | str,
    fmt: str,
    expected: str,
    *,
    found: Iterable[Any] | None = None,
    found_what: str = "keys",
    line: int | None = None,
    json_path: str | None = None,
) -> InputError:
    """The error for a file a reader was forced onto that is not its format.

    Every mirror must reject input that has none of its defining fields
    (``--format NAME`` skips ``sniff``, so ``read`` is the only check): an
    unrelated JSON document must never become a run with empty aggregates.
    ``expected`` says what the format needs; ``found`` (the keys, or
    ``found_what``, that were there) is quoted, shortened, so the user sees what was read instead.
    """
    article = "an" if fmt[:1].lower() in "aeio" else "a"
    message = f"not {article} {fmt} file: expected {expected}"
    if found is not None:
        keys = sorted(str(k) for k in found)
        shown = ", ".join(repr(k if len(k) <= 40 else k[:37] + "...") for k in keys[:6])
        more = ", ..." if len(keys) > 6 else ""
        message += f"; found {found_what} {shown}{more}" if keys else f"; found no {found_what}"
    return InputError(path, message, line=line, json_path=json_path)


def require_any_key(
    f: Fields,
    fmt: str,
    keys: Iterable[str],
    *,
    expected: str | None = None,
    also: Callable[[str], bool] | None = None,
) -> None:
    """Reject an object holding none of a format's defining ``keys`` (null counts
    as absent) nor any key ``also`` accepts (patterns such as ``*_ttft_ms``)."""
    keys = tuple(keys)
    if any(f.obj.get(k) is not None for k in keys):
        return
    if also is not None and any(also(k) and f.obj[k] is not None for k in f.obj):
        return
    raise not_this_format(
        f.path,
        fmt,
        expected or "at least one of " + ", ".join(keys),
        found=f.obj,
        line=f.line,
        json_path=f.prefix,
    )


def _type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), type(v).__name__
    )


def _short(v: Any) -> str:
    text = json.dumps(v, allow_nan=True) if not isinstance(v, (dict, list)) else ""
    return text if len(text) <= 40 else text[:37] + "..."


def scaled(values: Mapping[str, float | None], scale: float = 1.0) -> dict[str, float]:
    """Drop absent values and scale the rest, rounding away float noise."""
    return {k: round(v * scale, 6) for k, v in values.items() if v is not None}


def provenance(path: Path | str, fmt: str, version: str, notes: list[str], **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"file": str(path), "format": fmt, "format_version": version}
    for key, value in sorted(extra.items()):
        if value is not None and value != {} and value != []:
            out[key] = value
    if notes:
        out["notes"] = sorted(set(notes))
    return out


def document(run: Mapping[str, Any], requests: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A neutral observation document (schemas/observations.schema.json)."""
    doc: dict[str, Any] = {
        "version": 1,
        "kind": "tickgate.observations",
        "run": {k: v for k, v in run.items() if v is not None},
    }
    if requests is not None:
        doc["requests"] = requests
    return doc


def clean_aggregates(agg: dict[str, Any]) -> dict[str, Any]:
    """Remove empty entries so an absent figure is absent, not zero or {}."""
    out = {k: v for k, v in agg.items() if v is not None and v != {}}
    if "extra" in out:
        out["extra"] = dict(sorted(out["extra"].items()))
    return dict(sorted(out.items()))


def pick_line(
    path: Path, lines: list[tuple[int, Any]], line: int | None, what: str, notes: list[str]
) -> tuple[int, Any]:
    """Choose one run of an appended JSONL file: the given line, else the last.

    Bench clients append one result per run (``--append-result``,
    ``--output-file``); the last line is the most recent run.
    """
    if not lines:
        raise InputError(path, f"no {what} lines found (the file is empty)")
    if line is None:
        if len(lines) > 1:
            notes.append(
                f"{len(lines)} runs in this file; read the last (line {lines[-1][0]}); "
                f"select another with FILE#LINE"
            )
        return lines[-1]
    for lineno, value in lines:
        if lineno == line:
            return lineno, value
    raise InputError(
        path, f"no {what} on line {line}; runs are on lines " + ", ".join(str(n) for n, _ in lines)
    )
