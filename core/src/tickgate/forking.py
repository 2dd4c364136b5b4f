"""When a replay or an import may use helper processes on a second core.

Two parts of a large replay do not depend on the scheduler's decisions: reading
the workload (:mod:`tickgate.prefetch`) and rolling records up into the
fingerprint and summary (:mod:`tickgate.sidecar`). Each can run in a forked
child while the parent schedules; an import reads the second half of a large
trace in a child (:mod:`tickgate.import_parts`). That pays for big inputs on a machine where
this process may use two cores, and needs ``fork`` (the child inherits the
loaded plugins and the open stream). ``TICKGATE_PARALLEL=0`` turns helpers
off, ``TICKGATE_PARALLEL=1`` forces them (tests use it on small files); results
are identical either way.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path
from typing import Callable

ENV = "TICKGATE_PARALLEL"
#: inputs at least this big get helper processes
MIN_BYTES = 4 * 1024 * 1024

_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what this process may use, not what the machine has
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    return hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods()


def helpers_wanted(input_path: Path | None) -> bool:
    """Whether a replay or an import of ``input_path`` should use helper processes."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting in _OFF or not can_fork():
        return False
    if setting in _ON:
        return True
    if input_path is None or cores() < 2:
        return False
    try:
        return input_path.stat().st_size >= MIN_BYTES
    except OSError:
        return False  # reading in-process reports it


#: pipe ends this process holds to talk to its helpers. A helper forked later
#: inherits them and must close them: a copy of another helper's write end in
#: the wrong process would keep that helper from ever seeing end-of-input.
_held: set[int] = set()


def hold(*fds: int) -> None:
    """Note pipe ends the parent keeps for a helper."""
    _held.update(fds)


def drop(fd: int) -> None:
    """The parent closed ``fd`` (or is about to)."""
    _held.discard(fd)


def close_inherited(keep: tuple[int, ...] = ()) -> None:
    """In a freshly forked helper: close the other helpers' pipe ends."""
    for fd in _held - set(keep):
        try:
            os.close(fd)
        except OSError:  # pragma: no cover - already closed
            pass
    _held.clear()


_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def fork_helper(body: Callable[[], None], *, child_closes: tuple[int, ...],
                parent_closes: tuple[int, ...]) -> int:
    """Fork a helper that runs ``body`` and exits (status 0, or 1 if it raised).

    Ctrl-C between ``fork()`` and the child's own code would run the parent's
    handlers and cleanup in the child, so SIGINT/SIGTERM wait, blocked, until
    each side is ready: the child then has the default handlers, has closed
    ``child_closes`` and the other helpers' pipe ends; the parent has closed
    ``parent_closes``. Returns the child's pid.
    """
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for fd in (*child_closes, *parent_closes):
            os.close(fd)
        raise
    if pid == 0:  # pragma: no cover - the child; its behaviour is tested through the parents
        code = 0
        try:
            for signum in _SIGNALS:
                signal.signal(signum, signal.SIG_DFL)  # the parent's handlers are not the child's
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            for fd in child_closes:
                os.close(fd)
            close_inherited()
            body()
        except BaseException:
            code = 1  # the parent sees the pipe end early and says so
        finally:
            os._exit(code)
    try:
        for fd in parent_closes:
            os.close(fd)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return pid


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


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written (a pipe may take less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def how_it_ended(pid: int) -> str:
    """Reap helper ``pid`` and say how it ended."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"was killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.WEXITSTATUS(status)}"
