"""Atomic output files: written to a temporary file beside the target and
renamed into place only when complete, so a failure never leaves a
half-written report and never clobbers an existing one.

A write the system refuses (a full disk, a quota, an I/O error) is an
:class:`OutputError` naming the output and the reason, one line, exit 2: the
files here write through :class:`_OutputIO`, where the disk answers.

An output that already exists and is not a regular file is never replaced by
one: a character device (``/dev/null``, ``/dev/stdout``, ``/dev/full``) is
written through, as a shell redirection would; a named pipe, a block device, a
socket or a directory is refused before any work (a rename over ``/dev/null``,
run as root, would have replaced the system's device node with a file).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from .errors import TickgateError

#: what an existing output that is not a regular file is, by ``stat``'s file type;
#: character devices are written through, the others refused
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def existing_kind(path: Path | str) -> str | None:
    """What ``path`` (symbolic links followed) is when it exists and is not a regular
    file: ``"a directory"``, ``"a character device"`` ...; None for a regular file or
    nothing."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return next((kind for test, kind in _KINDS if test(mode)), None)


def _written_through(path: Path) -> bool:
    return existing_kind(path) == "a character device"


def check_writable(path: Path | str) -> None:
    """Fail before the work, not after it: an output path that is a directory, a
    named pipe, a block device or a socket (or whose parent is a file) is refused
    up front with one line. A character device is fine: it is written through."""
    path = Path(path)
    kind = existing_kind(path)
    if kind == "a directory":
        raise TickgateError(f"{path}: cannot write: it is a directory")
    if kind is not None and kind != "a character device":
        raise TickgateError(
            f"{path}: cannot write: it is {kind}; tickgate writes regular files "
            "(or through to a character device such as /dev/null)"
        )
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise TickgateError(f"{path}: cannot write: {parent} is not a directory")


def check_distinct_outputs(outputs: dict[str, Path | None], inputs: dict[str, Path | None]) -> None:
    """Refuse, before any work, outputs that are directories, two outputs on one
    file (one would silently replace the other) and an output over an input."""
    seen: dict[Path, str] = {}
    for option, path in inputs.items():
        if path is not None:
            seen.setdefault(_same_file_key(path), option)
    for option, path in outputs.items():
        if path is None:
            continue
        check_writable(path)
        key = _same_file_key(path)
        if key in seen and seen[key] not in inputs and _written_through(path):
            continue  # two outputs to one device (/dev/null) replace nothing
        if key in seen:
            raise TickgateError(
                f"{path}: {option} and {seen[key]} name the same file; "
                f"{'it would be overwritten' if seen[key] in inputs else 'one would replace the other'}"
            )
        seen[key] = option


def _same_file_key(path: Path) -> Path:
    return Path(os.path.realpath(path))


class OutputError(TickgateError):
    """An output could not be written: it names the output (not the temporary file
    the bytes were going to) and the system's reason."""

    def __init__(self, output: Path, exc: OSError) -> None:
        super().__init__(f"{output}: could not write: {exc.strerror or exc}")


class _OutputIO(io.FileIO):
    """The raw file under an output's buffers. Its ``write`` runs once per buffer
    (never per line, so the hot loop does not pay for it) and is where a full disk
    shows: there the OSError becomes an :class:`OutputError` for ``output``,
    whoever was writing (a sink, ``shutil.copyfileobj``, a helper process)."""

    output: Path

    def write(self, b: Any) -> int:
        try:
            return super().write(b)
        except OSError as exc:
            raise OutputError(self.output, exc) from None


def _text_file(fd: int, output: Path, *, readable: bool = False) -> TextIO:
    """``fd`` as ``open()`` would wrap it (UTF-8, ``\\n`` line ends, its block size as
    the buffer), writing through :class:`_OutputIO`."""
    raw = _OutputIO(fd, "r+" if readable else "w")
    raw.output = output
    size = 0
    with contextlib.suppress(OSError):
        size = os.fstat(fd).st_blksize
    buffer_size = size if size > 1 else io.DEFAULT_BUFFER_SIZE
    buffered = io.BufferedRandom(raw, buffer_size) if readable else io.BufferedWriter(raw, buffer_size)
    return io.TextIOWrapper(buffered, encoding="utf-8", newline="\n")


def _temp_beside(path: Path, suffix: str) -> tuple[int, str]:
    """A new temporary file in ``path``'s directory (created if missing): the
    rename into place stays on one file system."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    except OSError as exc:
        raise TickgateError(f"{path}: cannot write: {exc.strerror}") from None


@contextlib.contextmanager
def atomic_writer(path: Path | str, *, binary: bool = False) -> Iterator[Any]:
    """A text file written beside ``path`` and renamed over it when complete
    (``binary``: its byte buffer instead, for msgpack and other binary outputs).

    The new file gets the mode an ordinary ``open()`` would give it: the mode of
    the file it replaces, else the default for new files under the umask
    (``mkstemp`` alone would leave every report readable by its owner only).
    """
    path = Path(path)
    check_writable(path)
    if _written_through(path):
        yield from _write_through(path, binary=binary)
        return
    fd, tmp = _temp_beside(path, ".tmp")
    try:
        with _text_file(fd, path) as fh:
            with contextlib.suppress(OSError):  # a file system without modes keeps its own
                os.fchmod(fd, _mode_for(path))
            yield fh.buffer if binary else fh
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise OutputError(path, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _write_through(path: Path, *, binary: bool) -> Iterator[Any]:
    """A character device as the output: opened and written in place (no temporary
    file, no rename, no mode change); what the device refuses is an
    :class:`OutputError` for ``path``, as a full disk is for a file."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as exc:
        raise OutputError(path, exc) from None
    with _text_file(fd, path) as fh:
        yield fh.buffer if binary else fh


def spool_file(output: Path | str) -> TextIO:
    """An anonymous scratch file (text, read and write) for what is copied into
    ``output`` later: beside it, on the same file system, so a full disk shows
    while spooling and is reported as ``output``'s. Nothing is left behind: the
    file has no name once opened."""
    output = Path(output)
    if _written_through(output):  # nothing is created beside a device (in /dev)
        fd, tmp = tempfile.mkstemp(prefix=".tickgate.", suffix=".spool")
    else:
        fd, tmp = _temp_beside(output, ".spool")
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    return _text_file(fd, output, readable=True)


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    # the only portable way to read it is to set it; done once, before any thread
    global _UMASK
    if _UMASK is None:
        _UMASK = os.umask(0o022)
        os.umask(_UMASK)
    return _UMASK


_UMASK: int | None = None


_ROW_JSON = json.JSONEncoder(separators=(", ", ": "), ensure_ascii=False, allow_nan=False)


def dumps_rows(data: Any, indent: int = 0) -> str:
    """JSON laid out for people and fast to write: objects are indented, and a
    list of objects or lists puts one compact item per line (tick records,
    request outcomes). Compact items go through the C encoder; ``indent=2``
    would send a whole report of a million rows through the pure-Python one.
    (msgspec and orjson write no ``", "`` separators: rows stay with the
    standard library, one encoder for all of them.)"""
    pad = " " * indent
    inner = " " * (indent + 2)
    if isinstance(data, dict):
        if not data:
            return "{}"
        items = [
            f"{inner}{json.dumps(k if isinstance(k, str) else json.dumps(k), ensure_ascii=False)}: "
            f"{dumps_rows(v, indent + 2)}"
            for k, v in data.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(data, list) and data and all(isinstance(x, (dict, list)) for x in data):
        encode = _ROW_JSON.encode
        return "[\n" + ",\n".join(inner + encode(row) for row in data) + "\n" + pad + "]"
    return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


def write_json(path: Path | str, data: Any) -> None:
    """Write a JSON document atomically (layout: :func:`dumps_rows`)."""
    text = dumps_rows(data)
    with atomic_writer(path) as fh:
        fh.write(text)
        fh.write("\n")
