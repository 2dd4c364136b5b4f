"""Read YAML and JSON documents while remembering where every value came from,
so that schema errors can say ``file:line:col: $.json.path: what``.

YAML is loaded with ruamel.yaml's safe loader semantics (no tag constructs an
object), with bounds on size, depth and alias expansion: a policy file from
someone you should not trust cannot exhaust memory.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import InputError, PluginError, TickgateError, json_problem
from .jsonio import JsonProblem, loads

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000
MAX_INT = 10**15
#: the most :func:`rereadable` holds in memory of an input that cannot be read twice
MAX_HELD_BYTES = 1 << 30

Locations = dict[str, tuple[int, int]]  # json path -> (line, column), 1-based


def json_path(parts: Any) -> str:
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}"
    return out


@contextlib.contextmanager
def reading(path: Path | str, expected: str = "a file") -> Iterator[None]:
    """The file system's errors while reading ``path`` as the one-line errors
    every reader words the same way (``expected``: what the file should be)."""
    try:
        yield
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, f"is a directory, expected {expected}") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None


@contextlib.contextmanager
def open_text(path: Path, expected: str = "a file") -> Iterator[IO[str]]:
    """Open a file streamed as UTF-8 text, with errors that name it, including a
    decoding failure deep inside it (``expected``: what the file should be). A
    UTF-8 byte order mark at its start is dropped (Excel writes one before a CSV
    file's header, Windows tools before JSON lines). The file is opened once and
    read front to back: a pipe streams."""
    with _open(path, expected, "r", encoding="utf-8-sig", newline="") as fh:
        try:
            yield fh
        except UnicodeDecodeError as exc:
            raise InputError(path, f"not UTF-8 text ({exc.reason})") from None


def _open(path: Path, expected: str, mode: str, **kw: Any) -> IO[Any]:
    with reading(path, expected):
        return open(path, mode, **kw)


def open_binary(path: Path, expected: str = "a file") -> IO[bytes]:
    """Open a file to read its bytes, with errors that name it (a JSON
    document read by :class:`tickgate.util.jsonstream.JsonStream`, which checks
    its UTF-8 itself)."""
    return _open(path, expected, "rb")


@contextlib.contextmanager
def rereadable(path: Path, expected: str = "a file") -> Iterator[Path]:
    """``path``, or, when it cannot be read twice (a pipe, ``<(...)``, a FIFO), a
    stand-in that can: its bytes, read once into an in-memory file
    (``/proc/self/fd/N`` of a ``memfd``), for the readers that look at a file
    before they read it (format detection) or read it twice. The bytes are held
    in memory, so this is for inputs that are read whole anyway; a reader that
    streams reads the pipe itself. An :class:`InputError` that names the
    stand-in is raised again naming ``path``, and any other user-facing error
    mentioning it too. At most :data:`MAX_HELD_BYTES` are held (``/dev/zero``
    is an error, not all of memory)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        mode = stat.S_IFREG  # whoever opens it reports why it cannot be
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) or not hasattr(os, "memfd_create"):
        yield path  # a file, a directory, or a device (/dev/zero is refused by the head it shows)
        return
    data = read_bytes(path, limit=MAX_HELD_BYTES, expected=expected)
    fd = os.memfd_create("tickgate-input")
    try:
        with os.fdopen(os.dup(fd), "wb") as fh:
            fh.write(data)
        del data
        stand_in = f"/proc/self/fd/{fd}"  # opened anew: from its start, as often as needed
        try:
            yield Path(stand_in)
        except TickgateError as exc:
            raise _renamed(exc, stand_in, str(path)) from None
    finally:
        os.close(fd)


def _renamed(exc: TickgateError, old: str, new: str) -> TickgateError:
    """``exc`` naming ``new`` where it named ``old``."""
    if isinstance(exc, InputError):
        path = exc.path.replace(old, new) if exc.path is not None else None  # FILE#LINE too
        return InputError(
            path, exc.message.replace(old, new), line=exc.line, column=exc.column, json_path=exc.json_path
        )
    if type(exc) in (TickgateError, PluginError) and old in str(exc):
        return type(exc)(str(exc).replace(old, new))
    return exc


def read_bytes(path: Path, *, limit: int, expected: str = "a file") -> bytes:
    """The bytes of ``path``, at most ``limit`` of them: a bigger file is an error
    before it is read (its size), a pipe when it has sent more (it is read once,
    never more than ``limit`` + 1 bytes)."""
    with reading(path, expected):
        info = path.stat()
        if info.st_size > limit:
            raise InputError(
                path, f"file is {info.st_size} bytes; the limit for this kind of file is {limit}"
            )
        if stat.S_ISREG(info.st_mode):
            return path.read_bytes()  # its size is known: read at once
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(path, f"more than {limit} bytes; the limit for this kind of file is {limit}")
    return data


def read_text(path: Path, *, limit: int = MAX_DOCUMENT_BYTES) -> str:
    """The UTF-8 text of ``path`` (at most ``limit`` bytes: :func:`read_bytes`), a
    leading byte order mark dropped."""
    data = read_bytes(path, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start})") from None


def _yaml_to_plain(node: Any, path: list[Any], locs: Locations, file: Path, counter: list[int]) -> Any:
    """Copy ruamel's round-trip structures into plain dict/list values,
    recording line/column for each JSON path and enforcing the bounds."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    counter[0] += 1
    tag = getattr(getattr(node, "tag", None), "value", None)
    if isinstance(node, (CommentedMap, CommentedSeq)) and tag is not None:
        line, col = locs.get(json_path(path), (None, None))
        raise InputError(
            file,
            f"YAML tag {tag} is not allowed (safe loading: plain scalars, lists and mappings only)",
            line=line,
            column=col,
            json_path=json_path(path),
        )
    if counter[0] > MAX_NODES:
        raise InputError(file, f"document has more than {MAX_NODES} values (alias expansion?)")
    if len(path) > MAX_DEPTH:
        raise InputError(file, f"nesting deeper than {MAX_DEPTH} levels", json_path=json_path(path))
    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key in node:
            if not isinstance(key, str):
                line, col = _key_loc(node, key)
                raise InputError(
                    file,
                    f"mapping key {key!r} must be a string",
                    line=line,
                    column=col,
                    json_path=json_path(path),
                )
            line, col = _key_loc(node, key)
            locs[json_path([*path, key])] = (line, col)
            out[key] = _yaml_to_plain(node[key], [*path, key], locs, file, counter)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, item in enumerate(node):
            try:
                line, col = node.lc.item(i)
                locs[json_path([*path, i])] = (line + 1, col + 1)
            except Exception:
                pass
            items.append(_yaml_to_plain(item, [*path, i], locs, file, counter))
        return items
    if node is None or isinstance(node, (bool, str)):
        return str(node) if isinstance(node, str) else node
    if isinstance(node, int):
        if abs(node) > MAX_INT:
            line, col = locs.get(json_path(path), (None, None))
            raise InputError(
                file,
                f"number {node} is out of range (|n| <= {MAX_INT})",
                line=line,
                column=col,
                json_path=json_path(path),
            )
        return int(node)
    if isinstance(node, float):
        if not math.isfinite(node):
            line, col = locs.get(json_path(path), (None, None))
            raise InputError(
                file, f"{node} is not a finite number", line=line, column=col, json_path=json_path(path)
            )
        return float(node)
    line, col = locs.get(json_path(path), (None, None))
    tag = getattr(getattr(node, "tag", None), "value", None) or getattr(node, "tag", None)
    what = f"YAML tag {tag}" if isinstance(tag, str) else f"a value of type {type(node).__name__}"
    raise InputError(
        file,
        f"{what} is not allowed (safe loading: plain scalars, lists and mappings only)",
        line=line,
        column=col,
        json_path=json_path(path),
    )


def _key_loc(node: Any, key: Any) -> tuple[int, int]:
    try:
        line, col = node.lc.key(key)
        return line + 1, col + 1
    except Exception:
        return _node_loc(node)


def _node_loc(node: Any) -> tuple[int, int]:
    """Where a node starts; (1, 1) for a node ruamel built without a position
    (a document that is a single '=' is loaded as a value-tagged scalar)."""
    lc = getattr(node, "lc", None)
    line = getattr(lc, "line", None)
    col = getattr(lc, "col", None)
    return (line + 1 if isinstance(line, int) else 1, col + 1 if isinstance(col, int) else 1)


def load_yaml(path: Path) -> tuple[Any, Locations]:
    """Load one YAML document safely; return plain data and its locations."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    text = read_text(path, limit=1024 * 1024)
    yaml = YAML(typ="rt", pure=True)
    yaml.allow_duplicate_keys = False
    try:
        node = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = (exc.problem or exc.context or "invalid YAML").strip()
        if mark is not None:
            raise InputError(
                path, f"invalid YAML: {problem}", line=mark.line + 1, column=mark.column + 1
            ) from None
        raise InputError(path, f"invalid YAML: {problem}") from None
    except (YAMLError, RecursionError, ValueError) as exc:
        raise InputError(
            path, f"invalid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    locs: Locations = {}
    if hasattr(node, "lc"):
        locs["$"] = _node_loc(node)
    try:
        return _yaml_to_plain(node, [], locs, path, [0]), locs
    except RecursionError:
        raise InputError(path, f"nesting deeper than {MAX_DEPTH} levels") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _strict_loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def load_json(path: Path, *, limit: int = MAX_DOCUMENT_BYTES) -> Any:
    """Strict JSON: no NaN/Infinity, size-bounded, errors with line and column."""
    text = read_text(path, limit=limit)
    return parse_json(text, path)


def parse_json(text: str, path: Any, *, line_offset: int = 0) -> Any:
    """Strict JSON from ``text``, the file ``path``'s text from line
    ``line_offset + 1``; errors located as :func:`json_error` does."""
    try:
        return loads(text, _strict_loads)
    except (ValueError, RecursionError) as exc:
        raise json_error(path, exc, first_line=line_offset + 1 if line_offset else None) from None


def json_error(path: Any, exc: ValueError | RecursionError, *, first_line: int | None = None) -> InputError:
    """The error for a JSON text of file ``path`` that :func:`tickgate.util.jsonio.loads`
    refused: where the standard library found a syntax error, where a member is
    given twice or a NaN is (with its JSON path: :class:`~tickgate.util.jsonio.JsonProblem`),
    else as it was said. ``first_line``: the line of the file the text starts on
    (a JSONL line), None for a whole file."""
    before = first_line - 1 if first_line is not None else 0
    if isinstance(exc, JsonProblem):
        return InputError(path, exc.msg, line=exc.lineno + before, column=exc.colno, json_path=exc.json_path)
    if isinstance(exc, json.JSONDecodeError):
        return InputError(
            path, f"invalid JSON: {json_problem(exc.msg)}", line=exc.lineno + before, column=exc.colno
        )
    if isinstance(exc, RecursionError):
        return InputError(path, "invalid JSON: nested too deeply", line=first_line)
    return InputError(path, f"invalid JSON: {exc}", line=first_line)
