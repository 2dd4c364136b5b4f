"""Atomic output files: written to a temporary file beside the target and
renamed into place only when complete, so a failure never leaves a
half-written report and never clobbers an existing one."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from itertools import repeat
from pathlib import Path
from typing import Any, Iterator, TextIO

from .errors import TickgateError
from .jsonenc import chunk_encoder


@contextlib.contextmanager
def atomic_writer(path: Path | str) -> Iterator[TextIO]:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise TickgateError(f"{path}: cannot write: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def dumps_rows(data: Any, indent: int = 0) -> str:
    """JSON laid out for people and fast to write: objects are indented, and a
    list of objects or lists puts one compact item per line (tick records,
    request outcomes). Compact items go through the C encoder; ``indent=2``
    would send a whole report of a million rows through the pure-Python one."""
    pad = " " * indent
    inner = " " * (indent + 2)
    if isinstance(data, dict):
        if not data:
            return "{}"
        items = [f"{inner}{json.dumps(k if isinstance(k, str) else json.dumps(k), ensure_ascii=False)}: "
                 f"{dumps_rows(v, indent + 2)}" for k, v in data.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(data, list) and data and all(isinstance(x, (dict, list)) for x in data):
        encode = chunk_encoder(separators=(", ", ": "), ensure_ascii=False, allow_nan=False)
        rows = map(encode, data, repeat(0))
        return "[\n" + ",\n".join(inner + "".join(row) for row in rows) + "\n" + pad + "]"
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


def write_json(path: Path | str, data: Any) -> None:
    """Write a JSON document atomically (layout: :func:`dumps_rows`)."""
    text = dumps_rows(data)
    with atomic_writer(path) as fh:
        fh.write(text)
        fh.write("\n")
