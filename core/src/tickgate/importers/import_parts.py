"""Import a large trace in two processes: each reads and encodes half the file.

Reading a trace row by row (decoding, checking, building requests) and
encoding the workload lines is all ``tickgate import`` does, and no row depends
on the rows just before it, except for the arrival-order check. So for a large
file, with a second core and a reader that can read part of a file
(:attr:`tickgate.interfaces.WorkloadReader.reads_parts`), a forked child (a
:class:`~tickgate.parallel.helper.Helper`) reads and encodes the second half
into its own spool file while this process does the first half; the output is
the two spools in order, byte for byte what one process writes
(tests/test_import_parts.py).

The file is cut at a line start near its middle; the child is told the
line number there (lines counted as Python's text files count them). Errors
come out as in one process: the first half's first (the child is stopped),
then the check across the cut (the reader's ``join_parts``), then the second
half's, exactly as the child raised it. An earlier attempt sent the child's
requests through a pipe instead of its encoded lines and was slower than one
process: every block id crossed the pipe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from ..interfaces import FilePart, WorkloadReader, optional_attribute
from ..interfaces.model import Request
from ..parallel.helper import Channel, Helper
from ..parallel.switch import helpers_wanted
from ..workload.format import write_requests

#: bytes read at a time while counting the lines before the cut
_CHUNK = 1 << 20


def wanted(reader: WorkloadReader, path: Path, limit: int | None) -> bool:
    """Whether to import ``path`` in two processes: a big file (or
    ``TICKGATE_PARALLEL=1``), two cores, a reader that reads parts, no ``--limit``
    (which stops early: the second half would be wasted), and a regular file: a
    pipe cannot be cut in two (it is read once, by this process)."""
    return (
        limit is None
        and bool(optional_attribute(reader, "reads_parts"))
        and helpers_wanted(path)
        and path.is_file()
    )


def split(path: Path) -> tuple[FilePart, FilePart] | None:
    """Two parts of ``path`` cut at the first line start past its middle, or
    ``None`` if there is none (a one-line file, a file without ``\\n``)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        fh.seek(size // 2)
        fh.readline()  # to the end of the line the middle falls in: ends with b"\n"
        start = fh.tell()
        if start >= size or size // 2 == 0:
            return None
        fh.seek(0)
        # lines before the cut, as text files count them: "\n", "\r\n" or a lone "\r"
        lines = 0
        left = start
        prev_cr = False
        while left:
            chunk = fh.read(min(_CHUNK, left))
            left -= len(chunk)
            lines += chunk.count(b"\n") + chunk.count(b"\r") - chunk.count(b"\r\n")
            if prev_cr and chunk[:1] == b"\n":
                lines -= 1  # a "\r\n" split between two chunks
            prev_cr = chunk[-1:] == b"\r"
    return FilePart(0, 1, lines + 1), FilePart(start, lines + 1, None)


def read_in_parts(
    reader: WorkloadReader,
    path: Path,
    options: Mapping[str, Any],
    parts: tuple[FilePart, FilePart],
    first_spool: IO[str],
    second_spool: IO[str],
    *,
    counted: Callable[[Iterable[Request]], Iterable[Request]] = iter,
    mapped: Callable[[Iterable[Request]], Iterable[Request]] = iter,
) -> tuple[int, int]:
    """Write the requests of ``parts[0]`` to ``first_spool`` here and those of
    ``parts[1]`` to ``second_spool`` in a child; the number of each. The
    reader's ``source`` describes the whole file afterwards. ``counted`` wraps
    this process's requests (progress: :meth:`tickgate.util.progress.Progress.counted`);
    ``mapped`` changes both halves' requests before they are written (``--time-scale``)."""

    def second_half(channel: Channel) -> None:  # pragma: no cover - runs in the child
        count = None  # the second half failed
        try:
            written = write_requests(second_spool, mapped(reader.read_part(path, options, parts[1])))
            second_spool.flush()
            count = written
        finally:  # the check across the cut needs the state, whether the half was read or failed
            channel.send((count, reader.part_state()))

    # an error in the first half leaves the block: the child is stopped, its half does not matter
    with Helper(
        second_half,
        role=f"reading the second half of {path}",
        instead="reads it in this process instead",
        doing="reading a trace",
    ) as helper:
        first = write_requests(first_spool, counted(mapped(reader.read_part(path, options, parts[0]))))
        first_state = reader.part_state()
        second, second_state = helper.receive()
        reader.join_parts(path, first_state, second_state, second is None)
        helper.result()  # the end of the child, or the error of the second half
    return first, second
