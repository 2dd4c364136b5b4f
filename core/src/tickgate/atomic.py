"""Atomic output files: written to a temporary file beside the target and
renamed into place only when complete, so a failure never leaves a
half-written report and never clobbers an existing one."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, TextIO

from .errors import TickgateError


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


def write_json(path: Path | str, data: Any) -> None:
    with atomic_writer(path) as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False, allow_nan=False)
        fh.write("\n")
