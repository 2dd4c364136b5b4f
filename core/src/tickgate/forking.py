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

import os
import signal
from typing import Callable

# what is left here moves onto tickgate.parallel.helper.Helper helper by helper; until then
# both share the switch, the pipes and the set of held pipe ends
from .parallel.frames import PIPE_BYTES, pipe  # noqa: F401
from .parallel.helper import _held
from .parallel.switch import _OFF, _ON, ENV, MIN_BYTES, can_fork, cores, helpers_wanted  # noqa: F401


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
