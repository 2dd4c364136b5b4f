"""The one way a helper process is forked, talked to, and ended: :class:`Helper`.

``Helper(body)`` forks a child that runs ``body(channel)``: values the body
sends with ``channel.send`` arrive in the parent, in order, as frames
(:mod:`tickgate.parallel.frames`); what the body returns comes last. An error
the body raises comes back as data and is raised in the parent as it was: an
:class:`~tickgate.util.errors.InputError` with its location, a
:class:`~tickgate.util.errors.PluginError` or any other user-facing error with its
message (so the same exit code and one-line message as in one process); any
other exception is a bug and becomes an internal error naming what the helper
was doing. A child that dies without a word is a clear error naming it and
``TICKGATE_PARALLEL=0``. With ``to_child=True`` the parent may send values too;
the body iterates over them until the parent calls :meth:`Helper.done_sending`.

Leaving the ``with`` block (or :meth:`Helper.close`) closes the parent's pipe
ends, stops a child that has not finished (an error, Ctrl-C, a stream closed
early: it may be blocked on a full pipe) and reaps it: no zombie, no fd left.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from typing import IO, Any

from ..util.errors import TickgateError, error_as_data, error_from_data
from . import frames
from .switch import ENV

#: pipe ends this process holds to talk to its helpers. A helper forked later
#: inherits them and must close them: a copy of another helper's write end in
#: the wrong process would keep that helper from ever seeing end-of-input.
_held: set[int] = set()

_SIGNALS = {signal.SIGINT, signal.SIGTERM}

#: the kinds of frame besides the error kinds of :func:`tickgate.util.errors.error_as_data`
_VALUE, _END = "ok", "end"


class Channel:
    """The child's end of a :class:`Helper`: :meth:`send` values to the parent,
    iterate over the values the parent sends (``to_child=True``)."""

    def __init__(self, out_fd: int, in_fd: int | None) -> None:
        self._out = out_fd
        self._in = in_fd

    def send(self, value: Any) -> None:
        frames.send(self._out, (_VALUE, value))

    def __iter__(self) -> Iterator[Any]:
        assert self._in is not None, "Helper(to_child=True) sends the child values"
        with os.fdopen(self._in, "rb") as stream:
            while True:
                try:
                    yield frames.receive(stream)
                except frames.End:  # the parent is done sending
                    return


class Helper:
    """A forked child running ``body(channel)``; a context manager (see the module).

    ``role`` says what the child does, for the error when it dies ("the process
    {role} (pid N) was killed by signal 9{early}; TICKGATE_PARALLEL=0 {instead}");
    ``doing`` names the work in an internal error ("{doing} in a child process
    failed: ...")."""

    def __init__(
        self,
        body: Callable[[Channel], Any],
        *,
        role: str,
        instead: str,
        doing: str,
        early: str = "",
        to_child: bool = False,
    ) -> None:
        self._body = body
        self.role, self._instead, self._doing, self._early = role, instead, doing, early
        self._to_child = to_child
        self.pid = 0
        self._stream: IO[bytes] | None = None  # from the child
        self._out = -1  # to the child
        self._finished = False  # the child sent its last frame (its result or its error)
        self._reaped = False

    # -- start and end -----------------------------------------------------------------------
    def start(self) -> Helper:
        """Fork the child."""
        from_child, child_out = frames.pipe()
        parent_ends: tuple[int, ...] = (from_child,)
        child_ends: tuple[int, ...] = (child_out,)
        child_in = to_child = -1
        if self._to_child:
            try:
                child_in, to_child = frames.pipe()
            except BaseException:
                os.close(from_child)
                os.close(child_out)
                raise
            parent_ends, child_ends = (from_child, to_child), (child_out, child_in)
        self.pid = _fork(
            lambda: self._run_child(child_out, child_in if self._to_child else None),
            child_closes=parent_ends,
            parent_closes=child_ends,
        )
        self._stream = os.fdopen(from_child, "rb")  # closes from_child when closed
        self._out = to_child
        _held.update(parent_ends)
        return self

    def __enter__(self) -> Helper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the parent's pipe ends; stop the child unless it has finished; reap it."""
        if self._out >= 0:
            _held.discard(self._out)
            os.close(self._out)
            self._out = -1
        if self._stream is not None:
            _held.discard(self._stream.fileno())
            self._stream.close()
            self._stream = None
        if self.pid and not self._reaped:
            self._reaped = True
            if not self._finished:
                try:
                    os.kill(self.pid, signal.SIGTERM)  # it may be blocked on a full pipe
                except ProcessLookupError:  # pragma: no cover - already gone
                    pass
            os.waitpid(self.pid, 0)

    # -- parent to child ---------------------------------------------------------------------
    def send(self, value: Any) -> None:
        """Send ``value`` to the child (``to_child=True``)."""
        try:
            frames.send(self._out, value)
        except BrokenPipeError:
            raise self._died() from None

    def done_sending(self) -> None:
        """The end of what the parent sends: the child's iteration ends."""
        _held.discard(self._out)
        os.close(self._out)
        self._out = -1

    # -- child to parent ---------------------------------------------------------------------
    def receive(self) -> Any:
        """The next value the child sent; its error raised; an error if it died first."""
        return self._expect(_VALUE)

    def result(self) -> Any:
        """What the body returned (after every value it sent was received)."""
        return self._expect(_END)

    def __iter__(self) -> Iterator[Any]:
        """The values the child sends, until its body returns."""
        while True:
            kind, value = self._next()
            if kind == _END:
                return
            yield value

    def _expect(self, expected: str) -> Any:
        kind, value = self._next()
        if kind != expected:  # the parent and its body disagree on what comes next: a bug
            raise RuntimeError(
                f"{self._doing} in a child process: a frame {kind!r} came, {expected!r} was expected"
            )
        return value

    def _next(self) -> tuple[str, Any]:
        assert self._stream is not None and not self._finished, "the child has sent its last frame"
        try:
            kind, value = frames.receive(self._stream)
        except frames.End:
            raise self._died() from None
        if kind != _VALUE:
            self._finished = True
            if kind != _END:
                raise error_from_data(kind, value, self._doing)
        return kind, value

    def _died(self) -> BaseException:
        """Why the child is gone. Killed by SIGINT, it is the user's Ctrl-C, which reaches the
        whole process group: the parent is interrupted too, and says so as it would have had it
        seen the signal first (which of the two notices first is a race)."""
        self._reaped = True
        how = _how_it_ended(self.pid)
        if how == f"was killed by signal {int(signal.SIGINT)}":
            return KeyboardInterrupt()
        return TickgateError(
            f"the process {self.role} (pid {self.pid}) {how}{self._early}; {ENV}=0 {self._instead}"
        )

    # -- the child -----------------------------------------------------------------------------
    def _run_child(self, out_fd: int, in_fd: int | None) -> None:  # pragma: no cover - runs in the child
        try:
            message: tuple[str, Any] = (_END, self._body(Channel(out_fd, in_fd)))
        except Exception as exc:  # comes back as data, raised again in the parent
            message = error_as_data(exc)
        frames.send(out_fd, message)


def _fork(body: Callable[[], None], *, child_closes: tuple[int, ...], parent_closes: tuple[int, ...]) -> int:
    """Fork a child that runs ``body`` and exits (status 0, or 1 if it raised).

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
            for fd in _held:  # the other helpers' pipe ends
                try:
                    os.close(fd)
                except OSError:  # pragma: no cover - already closed
                    pass
            _held.clear()
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


def _how_it_ended(pid: int) -> str:
    """Reap ``pid`` and say how it ended."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return f"was killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.WEXITSTATUS(status)}"
