"""The reader-side plugin contract: workload readers (traces into requests), backend
mirrors (engine and client output into observations) and evidence parsers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from .model import Request
from .plugin import Plugin


@attrs.frozen
class FilePart:
    r"""The lines of a trace file one process reads when ``tickgate import``
    splits a large file between two (:mod:`tickgate.importers.import_parts`).

    ``start`` is the byte offset of line ``first_line`` (a line start); the part
    ends before line ``stop_line`` (``None``: at the end of the file). Lines are
    counted as Python's text files count them (``\n``, ``\r\n`` or ``\r``).
    """

    start: int
    first_line: int
    stop_line: int | None


class WorkloadReader(Plugin):
    """Streams :class:`Request` values out of a trace file.

    ``read`` must be a generator that yields requests in arrival order and
    raises :class:`tickgate.util.errors.InputError` naming the file and line for a
    bad row. ``options`` holds command-line options such as ``block_size`` and
    ``limit``.

    A format whose rows are independent lines may also set ``reads_parts`` and
    implement the three methods below; ``tickgate import`` then reads a large
    file in two processes, each a :class:`FilePart`, and writes exactly what
    ``read`` would have (tests/test_import_parts.py shows the contract).
    """

    #: ``read_part``, ``part_state`` and ``join_parts`` are implemented
    reads_parts: ClassVar[bool] = False
    #: tokens per prefix-block id when ``--block-size`` is not given (the report's
    #: ``block_size``); None: the format carries no prefix-block ids (so
    #: ``--block-size`` means nothing to it)
    default_block_size: ClassVar[int | None] = None
    #: what the format's files are (``"CSV"``, ``"JSONL"``): a file given without
    #: ``--input-format`` that is no workload file gets the formats listed by it
    file_kind: ClassVar[str | None] = None
    #: set by ``read`` on the instance: what was read (format, file, rows, skipped
    #: rows...), the imported workload's ``source``; None: format and file only
    source: dict[str, Any] | None = None
    #: set by ``read`` on the instance when the trace came from closed-loop clients (a benchmark
    #: client's ``--max-concurrency``): the imported workload's header ``max_concurrency``
    max_concurrency: int | None = None

    def read(self, path: Path, options: Mapping[str, Any]) -> Iterator[Request]:
        raise NotImplementedError

    def read_part(self, path: Path, options: Mapping[str, Any], part: FilePart) -> Iterator[Request]:
        """The requests ``read`` yields for the rows on ``part``'s lines, with the
        same ids and values (a row may depend on the file's first row, such as a
        time origin, but not on the rows just before the part). Raises what
        ``read`` raises for those rows, except for a check that spans rows across
        the part's start: that one is :meth:`join_parts`'s."""
        raise NotImplementedError

    def part_state(self) -> Any:
        """After (or while an error stops) ``read_part``: plain values (marshal-able)
        that :meth:`join_parts` needs, such as counts and the part's first row."""
        raise NotImplementedError

    def join_parts(self, path: Path, first: Any, second: Any, second_failed: bool) -> None:
        """Check the rows across the boundary of two consecutive parts (states from
        :meth:`part_state`) and make ``source`` describe both. Raises the error
        ``read`` would have raised at the boundary; ``second_failed``: the second
        part stopped on an error, raised after this unless this raises first."""
        raise NotImplementedError


class BackendMirror(Plugin):
    """Reads an engine's native output (bench results, metrics, streams).

    ``sniff(path, head)`` returns True when the file looks like this format
    (``head`` is its first 64 KiB); ``read(path)`` returns a neutral observation
    run (a dict valid against ``schemas/observations.schema.json``) whose
    provenance names the file, the format and the detected version.

    A self-describing format may set ``declared_kind``: a file whose JSON head
    declares ``"kind": "<declared_kind>"`` is read by that mirror without
    asking the others to sniff it (no ambiguity with a too-eager sniffer).
    """

    declared_kind: ClassVar[str | None] = None
    #: ``read(path, line=N)`` reads the run on line N of an appended JSONL results
    #: file (``FILE#N`` on the command line); False: one run per file
    accepts_line: ClassVar[bool] = False
    #: the files this mirror reads inside a client's artifact directory, in preference order
    #: (aiperf: ``profile_export.jsonl`` first): a directory given as an input is read through
    #: the first of them that it (or its one subdirectory) holds
    artifact_files: ClassVar[tuple[str, ...]] = ()

    def sniff(self, path: Path, head: bytes) -> bool:
        raise NotImplementedError

    def read(self, path: Path) -> dict[str, Any]:
        raise NotImplementedError


class EvidenceParser(Plugin):
    """Turns a token-stream capture into per-request streaming evidence dicts."""

    def sniff(self, path: Path, head: bytes) -> bool:
        raise NotImplementedError

    def parse(self, path: Path) -> list[dict[str, Any]]:
        raise NotImplementedError
