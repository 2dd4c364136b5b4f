"""Read a workload file in a forked child process while the parent replays it.

Reading a workload (decoding JSON, checking every request, expanding block-id
runs) is about a tenth of a large replay and does not depend on it, so on a
machine with a second core a child process reads ahead while the parent
schedules. The child sends each request's fields as a plain tuple, in batches
(``marshal``: C speed, no classes pickled), through a pipe; a full pipe
stops it, so memory stays bounded however far ahead it could read. An error
comes back as data and is raised in the parent, unchanged, once the requests
before it have been handed out: exactly what reading in-process does.

Used for workload files of ``PREFETCH_BYTES`` or more, where ``fork`` exists
and the machine has two cores. ``TICKGATE_PREFETCH=0`` turns it off,
``TICKGATE_PREFETCH=1`` forces it (tests use that on small files).
"""

from __future__ import annotations

import marshal
import multiprocessing
import os
import signal
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterable, Iterator

import attrs

from .errors import InputError, PluginError, TickgateError
from .model import Request

#: workload files at least this big are read ahead in a child process
PREFETCH_BYTES = 4 * 1024 * 1024
#: requests per message
BATCH = 256

_FIELDS = tuple(a.name for a in attrs.fields(Request))
_fields_of = attrgetter(*_FIELDS)


def worth_it(path: Path) -> bool:
    """Whether reading ``path`` ahead in a child process pays (or is asked for)."""
    setting = os.environ.get("TICKGATE_PREFETCH", "")
    if setting == "0" or not hasattr(os, "fork") or "fork" not in multiprocessing.get_all_start_methods():
        return False
    if setting == "1":
        return True
    if (os.cpu_count() or 1) < 2:
        return False
    try:
        return path.stat().st_size >= PREFETCH_BYTES
    except OSError:
        return False  # reading in-process reports it


def prefetched(requests: Iterable[Request]) -> Iterator[Request]:
    """The same requests, read by a forked child. ``requests`` must be a fresh,
    unstarted stream: the child consumes it, the parent must not. The child
    starts with the first request asked for, so a stream never read starts
    none."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child; its behaviour is tested through the parent
        os.close(read_fd)
        code = 0
        try:
            _produce(requests, write_fd)
        except BaseException:
            code = 1  # the parent sees the pipe end without "end" and says so
        finally:
            os._exit(code)
    os.close(write_fd)
    yield from _consume(read_fd, pid)


def _produce(requests: Iterable[Request], fd: int) -> None:
    batch: list[tuple[Any, ...]] = []
    try:
        for request in requests:
            batch.append(_fields_of(request))
            if len(batch) == BATCH:
                _send(fd, ("ok", batch))
                batch = []
        _send(fd, ("ok", batch))
        _send(fd, ("end", None))
    except InputError as exc:
        _send(fd, ("ok", batch))
        _send(fd, ("input", (exc.path, exc.message, exc.line, exc.column, exc.json_path)))
    except TickgateError as exc:
        _send(fd, ("ok", batch))
        _send(fd, ("plugin" if isinstance(exc, PluginError) else "tickgate", str(exc)))
    except Exception as exc:  # a bug: an internal error in the parent, as in-process
        _send(fd, ("ok", batch))
        _send(fd, ("bug", f"{type(exc).__name__}: {exc}"))


def _send(fd: int, message: tuple[str, Any]) -> None:
    data = marshal.dumps(message)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[os.write(fd, view):]


def _consume(fd: int, pid: int) -> Iterator[Request]:
    finished = False
    try:
        with os.fdopen(fd, "rb") as pipe:
            read = pipe.read
            while True:
                head = read(8)
                if len(head) < 8:
                    raise RuntimeError("the process reading the workload ended without finishing")
                kind, value = marshal.loads(read(int.from_bytes(head, "little")))
                if kind == "ok":
                    for fields in value:
                        yield Request(*fields)
                elif kind == "end":
                    finished = True
                    return
                else:
                    finished = True
                    raise _error(kind, value)
    finally:
        if not finished:
            try:
                os.kill(pid, signal.SIGTERM)  # stopped early (an error, a limit): it may be blocked on the pipe
            except ProcessLookupError:  # pragma: no cover - already gone
                pass
        os.waitpid(pid, 0)


def _error(kind: str, value: Any) -> Exception:
    if kind == "input":
        path, message, line, column, json_path = value
        return InputError(path, message, line=line, column=column, json_path=json_path)
    if kind == "plugin":
        return PluginError(value)
    if kind == "tickgate":
        return TickgateError(value)
    return RuntimeError(f"reading the workload in a child process failed: {value}")
