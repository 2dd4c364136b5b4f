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
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from .errors import InputError, json_problem
from .jsonio import loads

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000
MAX_INT = 10**15

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
    decoding failure deep inside it (``expected``: what the file should be)."""
    with _open(path, expected, "r", encoding="utf-8", newline="") as fh:
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


def read_text(path: Path, *, limit: int = MAX_DOCUMENT_BYTES) -> str:
    with reading(path):
        size = path.stat().st_size
    if size > limit:
        raise InputError(path, f"file is {size} bytes; the limit for this kind of file is {limit}")
    try:
        with reading(path):
            return path.read_text(encoding="utf-8")
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
    try:
        return loads(text, _strict_loads)
    except json.JSONDecodeError as exc:
        raise InputError(
            path, f"invalid JSON: {json_problem(exc.msg)}", line=exc.lineno + line_offset, column=exc.colno
        ) from None
    except ValueError as exc:
        raise InputError(
            path, f"invalid JSON: {exc}", line=(line_offset + 1) if line_offset else None
        ) from None
    except RecursionError:
        raise InputError(path, "invalid JSON: nested too deeply") from None
