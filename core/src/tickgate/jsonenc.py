"""One reusable C JSON encoder for many small values.

``json.dumps`` and ``JSONEncoder.encode`` build a new C encoder on every call,
which is about a third of the time of encoding a short row; writers of
millions of rows (report outcomes, workload lines) build one here and call it
per row. The output is byte-identical to ``json.dumps`` with the same options.
"""

from __future__ import annotations

import json
from json.encoder import (  # type: ignore[attr-defined]
    c_make_encoder,
    encode_basestring,
    encode_basestring_ascii,
)
from typing import Any, Callable

#: ``encoder(value, 0)`` returns the JSON text of ``value`` as a list of chunks
ChunkEncoder = Callable[[Any, int], "list[str] | tuple[str, ...]"]


def chunk_encoder(*, separators: tuple[str, str], ensure_ascii: bool, allow_nan: bool) -> ChunkEncoder:
    """A C encoder with ``json.dumps``'s options (no indent, keys unsorted,
    circular references detected); join what it returns. After it raises,
    build a new one: its circular-reference markers may be left behind."""
    item_sep, key_sep = separators
    if c_make_encoder is None:  # pragma: no cover - CPython always has it
        dumps = json.JSONEncoder(separators=separators, ensure_ascii=ensure_ascii, allow_nan=allow_nan).encode
        return lambda value, _level: (dumps(value),)
    return c_make_encoder({}, _unserializable, encode_basestring_ascii if ensure_ascii else encode_basestring,
                          None, key_sep, item_sep, False, False, allow_nan)


def _unserializable(obj: Any) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
