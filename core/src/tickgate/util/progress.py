"""Progress of long commands (replay, import, gate) on stderr, for people watching.

Shown only when stderr is a terminal (and the command is not ``--quiet``): in a
pipe, a CI log or a test, nothing is printed, no wrapper is put around anything,
and the command runs exactly the code it runs without progress. The display is
tqdm's: a well-kept library that redraws one line, at most every ``mininterval``
seconds. Its clock is read only in the display (tqdm's own time checks), never
by the replay, and nothing it shows reaches a report, a trace or stdout.

The hot loops do not call the display per item: :meth:`Progress.counted` hands
items through unchanged and tells the bar every :data:`EVERY` items.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: items between two updates of the bar (an update is a few attribute reads and,
#: past ``MININTERVAL``, a redraw)
EVERY = 256
#: seconds between two redraws
MININTERVAL = 0.5


def wanted(quiet: bool = False) -> bool:
    """Whether to show progress: stderr is a terminal and the command is not quiet."""
    if quiet:
        return False
    stream = sys.stderr
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


class Progress:
    """One bar; :data:`OFF` when there is none to show (every method a no-op)."""

    def __init__(self, bar: Any = None) -> None:
        self.bar = bar

    def counted(self, items: Iterable[T]) -> Iterable[T]:
        """``items`` unchanged (the same object when there is no bar), counted on
        the bar in batches of :data:`EVERY`."""
        if self.bar is None:
            return items
        return self._count(items)

    def _count(self, items: Iterable[T]) -> Iterator[T]:
        update = self.bar.update
        n = 0
        try:
            for item in items:
                yield item
                n += 1
                if n == EVERY:
                    update(n)
                    n = 0
        finally:
            if n:
                update(n)

    def expect(self, total: int) -> None:
        """The number of units, once it is known."""
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def step(self, label: str) -> None:
        """One unit done; ``label`` says what it was."""
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(1)


OFF = Progress()


@contextlib.contextmanager
def progress(desc: str, *, unit: str, total: int | None = None, quiet: bool = False) -> Iterator[Progress]:
    """A bar on stderr while the block runs, erased when it ends (the command's
    own output, or its error line, then stands alone), or :data:`OFF`."""
    if not wanted(quiet):
        yield OFF
        return
    from tqdm import tqdm  # only when shown: start-up stays fast

    class Bar(tqdm):
        monitor_interval = 0  # no monitor thread: replays, imports and gates fork helpers

    bar = Bar(
        desc=desc,
        unit=unit,
        total=total,
        file=sys.stderr,
        mininterval=MININTERVAL,
        leave=False,
        dynamic_ncols=True,
    )
    try:
        yield Progress(bar)
    finally:
        bar.close()
