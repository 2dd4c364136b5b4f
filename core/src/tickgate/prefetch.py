"""Read a workload file in a forked child process while the parent replays it.

Reading a workload (decoding JSON, checking every request, expanding block-id
runs) is about a tenth of a large replay and does not depend on it, so on a
machine with a second core a child process reads ahead while the parent
schedules. The child sends each request's fields as a plain tuple, in batches
of ``BATCH`` requests or ``BATCH_IDS`` ids (``marshal``: C speed, no classes
pickled), through a pipe; a
full pipe stops it, so it is never more than a few batches ahead. An input
error comes back as data and is raised in the parent, unchanged, once the
requests before it have been handed out: exactly what reading in-process
does (a bug in the reader surfaces as an internal error either way, its
message wrapped).

Used when :func:`tickgate.forking.helpers_wanted` says so (big files, two
cores, ``TICKGATE_PARALLEL``).
"""

from __future__ import annotations

import marshal
import os
import signal
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterable, Iterator

import attrs

from .errors import InputError, PluginError, TickgateError
from .forking import drop, fork_helper, helpers_wanted, hold, how_it_ended, write_all
from .model import Request

#: requests per message, at most
BATCH = 256
#: block and token ids per message, at most (plus one request)
BATCH_IDS = 1 << 16

_FIELDS = tuple(a.name for a in attrs.fields(Request))
_fields_of = attrgetter(*_FIELDS)


def worth_it(path: Path) -> bool:
    """Whether reading ``path`` ahead in a child process pays (or is asked for)."""
    return helpers_wanted(path)


def prefetched(requests: Iterable[Request]) -> Iterator[Request]:
    """The same requests, read by a forked child. ``requests`` must be a fresh,
    unstarted stream: the child consumes it, the parent must not. The child
    starts with the first request asked for, so a stream never read starts
    none."""
    read_fd, write_fd = os.pipe()
    pid = fork_helper(lambda: _produce(requests, write_fd), child_closes=(read_fd,), parent_closes=(write_fd,))
    finished = reaped = False
    hold(read_fd)
    pipe = os.fdopen(read_fd, "rb")  # closes read_fd when closed
    try:
        read = pipe.read
        while True:
            head = read(8)
            size = int.from_bytes(head, "little") if len(head) == 8 else -1
            body = read(size) if size >= 0 else b""
            if size < 0 or len(body) != size:
                how = how_it_ended(pid)
                finished = reaped = True
                raise TickgateError(f"the process reading the workload ahead (pid {pid}) {how} before "
                                    "the end of the workload; TICKGATE_PARALLEL=0 reads it in this "
                                    "process instead")
            kind, value = marshal.loads(body)
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
        drop(read_fd)
        pipe.close()
        if not finished:
            try:
                os.kill(pid, signal.SIGTERM)  # stopped early (an error, a limit): it may be blocked on the pipe
            except ProcessLookupError:  # pragma: no cover - already gone
                pass
        if not reaped:
            os.waitpid(pid, 0)


def _produce(requests: Iterable[Request], fd: int) -> None:
    batch: list[tuple[Any, ...]] = []
    ids = 0  # block and token ids in the batch: long prompts make smaller batches
    try:
        for request in requests:
            batch.append(_fields_of(request))
            if request.prefix_blocks is not None:
                ids += len(request.prefix_blocks)
            if request.prompt_token_ids is not None:
                ids += len(request.prompt_token_ids)
            if len(batch) == BATCH or ids >= BATCH_IDS:
                _send(fd, ("ok", batch))
                batch = []
                ids = 0
        message: tuple[str, Any] = ("end", None)
    except InputError as exc:
        message = ("input", (exc.path, exc.message, exc.line, exc.column, exc.json_path))
    except TickgateError as exc:
        message = ("plugin" if isinstance(exc, PluginError) else "tickgate", str(exc))
    except Exception as exc:  # a bug (or a value marshal refuses): an internal error in the parent
        message = ("bug", f"{type(exc).__name__}: {exc}")
        batch = []  # it may be the batch that could not be sent
    if batch:
        _send(fd, ("ok", batch))
    _send(fd, message)


def _send(fd: int, message: tuple[str, Any]) -> None:
    data = marshal.dumps(message)
    write_all(fd, len(data).to_bytes(8, "little"))
    write_all(fd, data)


def _error(kind: str, value: Any) -> Exception:
    if kind == "input":
        path, message, line, column, json_path = value
        return InputError(path, message, line=line, column=column, json_path=json_path)
    if kind == "plugin":
        return PluginError(value)
    if kind == "tickgate":
        return TickgateError(value)
    return RuntimeError(f"reading the workload in a child process failed: {value}")
