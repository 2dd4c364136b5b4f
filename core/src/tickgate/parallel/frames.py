"""The one frame protocol of the helpers' pipes.

A frame is one value behind a 9-byte head: the length of the body (8 bytes,
little-endian) and how the body is encoded, ``m`` for ``marshal`` (C speed, no
classes: what requests, records and counts are) or ``p`` for ``pickle``, used
for a value marshal refuses (a plugin's exotic record detail, a summary sink,
a gate side's columns). Head and body leave in one ``writev``, so the reader
wakes once per frame and nothing is copied to join them.
"""

from __future__ import annotations

import marshal
import os
import pickle
import struct
from typing import IO, Any

#: body length, encoding
HEAD = struct.Struct("<Qc")
_MARSHAL, _PICKLE = b"m", b"p"

#: bytes a helper's pipe can hold (Linux's unprivileged maximum by default):
#: a burst of records or requests fills 64 KiB in well under a millisecond, and
#: then the faster side waits on the slower one's time slice
PIPE_BYTES = 1 << 20


def pipe() -> tuple[int, int]:
    """``os.pipe()``, enlarged to ``PIPE_BYTES`` where the system allows it."""
    read_fd, write_fd = os.pipe()
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not a POSIX system (no helpers there anyway)
        return read_fd, write_fd
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if set_size is not None:
        try:
            fcntl.fcntl(write_fd, set_size, PIPE_BYTES)
        except OSError:  # over the user's pipe-buffer quota: the default size works too
            pass
    return read_fd, write_fd


def send(fd: int, value: Any) -> None:
    """Write ``value`` to ``fd`` as one frame."""
    try:
        body, how = marshal.dumps(value), _MARSHAL
    except ValueError:  # a value marshal does not know: pickle knows more
        body, how = pickle.dumps(value, pickle.HIGHEST_PROTOCOL), _PICKLE
    head = HEAD.pack(len(body), how)
    done = os.writev(fd, (head, body))
    if done < len(head):  # a pipe may take less (a signal during a large write)
        _write_all(fd, head[done:])
        done = len(head)
    _write_all(fd, memoryview(body)[done - len(head) :])


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class End(Exception):
    """The pipe ended (its writer closed it or exited) where a frame should begin
    or in the middle of one."""


def receive(stream: IO[bytes]) -> Any:
    """The value of the next frame in ``stream`` (a buffered pipe end); :class:`End`
    if there is none."""
    head = stream.read(HEAD.size)
    if len(head) < HEAD.size:
        raise End()
    size, how = HEAD.unpack(head)
    body = stream.read(size)
    if len(body) < size:
        raise End()
    return marshal.loads(body) if how == _MARSHAL else pickle.loads(body)
