"""Read a workload file in a forked child process while the parent replays it.

Reading a workload (decoding JSON, checking every request, expanding block-id
runs) is about a tenth of a large replay and does not depend on it, so on a
machine with a second core a child process reads ahead while the parent
schedules. The child sends each request's fields as a plain tuple, in batches
of ``BATCH`` requests or ``BATCH_IDS`` ids (``marshal``: C speed, no classes
pickled), through a pipe (``forking.pipe``: 1 MiB); a full pipe stops it, so
it is never more than that far ahead. An input
error comes back as data and is raised in the parent, unchanged, once the
requests before it have been handed out: exactly what reading in-process
does (a bug in the reader surfaces as an internal error either way, its
message wrapped).

The replay command uses it when :func:`tickgate.forking.helpers_wanted` says
so (big files, two cores, ``TICKGATE_PARALLEL``).
"""

from __future__ import annotations

import marshal
import os
import signal
from operator import attrgetter
from typing import Any, Iterable, Iterator

import attrs

from .errors import TickgateError, error_as_data, error_from_data
from .forking import drop, fork_helper, hold, how_it_ended, pipe, write_all
from .model import Request

#: requests per message, at most
BATCH = 256
#: block and token ids per message, at most (plus one request)
BATCH_IDS = 1 << 16

_FIELDS = tuple(a.name for a in attrs.fields(Request))
_fields_of = attrgetter(*_FIELDS)


def prefetched(requests: Iterable[Request]) -> Iterator[Request]:
    """The same requests, read by a forked child. ``requests`` must be a fresh,
    unstarted stream: the child consumes it, the parent must not. The child
    starts with the first request asked for, so a stream never read starts
    none."""
    read_fd, write_fd = pipe()
    pid = fork_helper(lambda: _produce(requests, write_fd), child_closes=(read_fd,), parent_closes=(write_fd,))
    finished = reaped = False
    hold(read_fd)
    incoming = os.fdopen(read_fd, "rb")  # closes read_fd when closed
    try:
        read = incoming.read
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
                raise error_from_data(kind, value, "reading the workload")
    finally:
        drop(read_fd)
        incoming.close()
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
    except _Unsendable as exc:  # a value marshal refuses, in this batch
        message = error_as_data(exc.__cause__ or exc)
        batch = []
    except Exception as exc:  # errors come back as data, raised again in the parent
        message = error_as_data(exc)
    if batch:
        _send(fd, ("ok", batch))
    _send(fd, message)


class _Unsendable(Exception):
    pass


def _send(fd: int, message: tuple[str, Any]) -> None:
    try:
        data = marshal.dumps(message)
    except ValueError as exc:
        raise _Unsendable() from exc
    write_all(fd, len(data).to_bytes(8, "little"))
    write_all(fd, data)
