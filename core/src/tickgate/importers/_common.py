"""What every trace reader shares: opening files, the CSV row loop, parsing numbers with located
errors, the arrival-order rule, and the provenance record.

Rules common to all formats (see docs/importers.md):

* ``arrival_ms`` is relative to the first row of the file (that row arrives
  at 0 ms), so a trace always starts at the beginning of the replay.
* Rows must already be in arrival order (equal timestamps are fine and keep
  file order). An earlier timestamp after a later one is an error naming the
  line: silently reordering would need an unbounded buffer, and a bounded one
  would make the result depend on a window size nobody chose.
* A row whose prompt or output is 0 tokens cannot be replayed (the workload
  schema needs at least one of each: BurstGPT logs failed requests this way);
  it is skipped, counted and its first line numbers kept in ``source``.
* Request ids are ``<prefix>-<line number, 8 digits>``: stable, traceable to
  the file, and in file order when the admission policy breaks arrival ties
  by id.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..interfaces import WorkloadReader
from ..interfaces.model import Request
from ..util.errors import InputError, TickgateError
from ..util.locations import MAX_INT, open_text
from ..workload.format import MAX_TOKENS
from ..workload.generate import MAX_ARRIVAL_MS

#: how many skipped line numbers the provenance record keeps
SKIPPED_LINES_KEPT = 20


class SkipTally:
    """Counts rows that were read but not replayed, per reason, keeping the first lines."""

    def __init__(self, where: str = "first_lines") -> None:
        #: what the kept numbers are: ``first_lines`` (a trace's line numbers) or ``first_requests``
        #: (positions in a benchmark client's request list, whose file is one JSON document)
        self.where = where
        self.by_reason: dict[str, dict[str, Any]] = {}

    def add(self, reason: str, line: int | str) -> None:
        entry = self.by_reason.get(reason)
        if entry is None:
            entry = self.by_reason[reason] = {"count": 0, self.where: []}
        entry["count"] += 1
        if len(entry[self.where]) < SKIPPED_LINES_KEPT:
            entry[self.where].append(line)

    @property
    def total(self) -> int:
        return sum(e["count"] for e in self.by_reason.values())

    def to_json(self) -> dict[str, Any]:
        return {
            reason: {"count": e["count"], self.where: list(e[self.where])}
            for reason, e in sorted(self.by_reason.items())
        }


class TraceReader(WorkloadReader):
    """Base of the built-in trace readers.

    A reader instance reads one file. While :meth:`read` streams, ``source``
    is kept up to date (rows read, requests yielded, rows skipped and why), so
    ``tickgate import`` can put it in the workload header even when ``--limit``
    stops the stream early.
    """

    #: prefix of generated request ids
    id_prefix: str = "r"

    def __init__(self) -> None:
        self.source: dict[str, Any] = {}
        self.skipped = SkipTally()

    def block_size(self, options: Mapping[str, Any]) -> int | None:
        value = options.get("block_size")
        if value is None:
            return self.default_block_size
        if self.default_block_size is None:
            raise TickgateError(f"--block-size: the {self.name} format has no prefix-block ids")
        if type(value) is not int or not 1 <= value <= 65536:
            raise TickgateError(f"--block-size must be an integer from 1 to 65536, got {value!r}")
        return value

    def start(self, path: Path, options: Mapping[str, Any]) -> None:
        self.skipped = SkipTally()
        self.source = {
            "format": self.name,
            "file": str(path),
            "rows": 0,
            "requests": 0,
            "time_origin": "arrival_ms is relative to the first row",
        }
        bs = self.block_size(options)
        if bs is not None:
            self.source["block_size"] = bs

    def progress(self, rows: int, requests: int) -> None:
        self.source["rows"] = rows
        self.source["requests"] = requests
        if self.skipped.by_reason:
            self.source["skipped"] = self.skipped.to_json()

    def request_id(self, line: int) -> str:
        return f"{self.id_prefix}-{line:08d}"

    # -- reading a file in two parts (tickgate.importers.import_parts) ----------
    # A reader that sets ``reads_parts`` keeps its ArrivalOrder in ``order`` while
    # it reads a part; the rest is common to every format.
    order: ArrivalOrder | None = None

    def part_state(self) -> dict[str, Any]:
        order = self.order
        return {
            "source": dict(self.source),
            "first": list(order.first) if order is not None and order.first is not None else None,
            "last": [order.last, order.last_line] if order is not None and order.last is not None else None,
        }

    def join_parts(self, path: Path, first: Any, second: Any, second_failed: bool) -> None:
        """The second part's first row must not be earlier than the first part's
        last; ``source`` becomes both parts' counts and skipped rows."""
        if first["last"] is not None and second["first"] is not None:
            assert self.order is not None  # read_part set it
            order = ArrivalOrder(path, self.order.column)
            order.first = tuple(second["first"])
            order.follows(first["last"][0], first["last"][1])
        if second_failed:
            return
        a, b = first["source"], second["source"]
        source = dict(a)
        source["rows"] = a["rows"] + b["rows"]
        source["requests"] = a["requests"] + b["requests"]
        skipped = SkipTally()
        for part in (a, b):
            for reason, entry in part.get("skipped", {}).items():
                mine = skipped.by_reason.setdefault(reason, {"count": 0, "first_lines": []})
                mine["count"] += entry["count"]
                room = SKIPPED_LINES_KEPT - len(mine["first_lines"])
                mine["first_lines"].extend(entry["first_lines"][:room])
        source.pop("skipped", None)
        if skipped.by_reason:
            source["skipped"] = skipped.to_json()
        self.source = source


class CsvRow:
    """One data row of a CSV trace, read by column name, with errors that name
    the file and line."""

    __slots__ = ("cells", "index", "line", "path")

    def __init__(self, path: Path, line: int, cells: list[str], index: dict[str, int]) -> None:
        self.path = path
        self.line = line
        self.cells = cells
        self.index = index

    def text(self, column: str) -> str:
        return field(self.path, self.cells, self.index[column], column, self.line)

    def count(self, column: str) -> int:
        """A token count (:func:`parse_count`)."""
        path, line = self.path, self.line
        return parse_count(path, line, column, field(path, self.cells, self.index[column], column, line))

    def seconds(self, column: str) -> float:
        """A time in seconds (:func:`parse_seconds`)."""
        path, line = self.path, self.line
        return parse_seconds(path, line, column, field(path, self.cells, self.index[column], column, line))

    def error(self, message: str) -> InputError:
        return InputError(self.path, message, line=self.line)


class CsvTraceReader(TraceReader):
    """Base of the CSV trace readers: the row loop, its counts, skips and
    progress written once; a format says how one row becomes a request.

    A subclass names the ``columns`` its header must hold, the ``time_column``
    rows are ordered by and how errors name the format (``csv_format``), and
    implements :meth:`request`. Per-file state goes in an override of
    :meth:`start` (which calls this one).
    """

    columns: tuple[str, ...] = ()
    time_column: str = ""
    csv_format: str = ""
    file_kind = "CSV"

    def read(self, path: Path, options: Mapping[str, Any]) -> Iterator[Request]:
        self.start(path, options)
        order = ArrivalOrder(path, self.time_column)
        request = self.request
        rows = requests = 0
        for line, cells, index in csv_rows(path, self.columns, self.csv_format):
            rows += 1
            got = request(CsvRow(path, line, cells, index), order)
            if got.__class__ is str:
                self.skipped.add(got, line)
                self.progress(rows, requests)
                continue
            requests += 1
            self.progress(rows, requests)
            yield got  # type: ignore[misc]  # not a str: a Request (mypy does not narrow on __class__)
        self.progress(rows, requests)

    def request(self, row: CsvRow, order: ArrivalOrder) -> Request | str:
        """The request of one data row (its time checked with ``order``), or
        why the row is skipped: a reason as :class:`SkipTally` counts it."""
        raise NotImplementedError


def parse_count(path: Path, line: int, column: str, text: str) -> int:
    """A token count: a non-negative integer (``"12"``; ``"12.0"`` is accepted too)."""
    try:
        value = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            f = None
        if f is None or not f.is_integer():
            raise InputError(
                path, f"{column}: expected a whole number of tokens, found {text!r}", line=line
            ) from None
        value = int(f)
    if value < 0 or value > MAX_TOKENS:
        raise InputError(path, f"{column}: expected 0..{MAX_TOKENS} tokens, found {value}", line=line)
    return value


def parse_seconds(path: Path, line: int, column: str, text: str) -> float:
    """A time in seconds: a finite, non-negative number."""
    try:
        value = float(text)
    except ValueError:
        raise InputError(path, f"{column}: expected a time in seconds, found {text!r}", line=line) from None
    if not (0.0 <= value <= MAX_INT):  # also rejects nan
        raise InputError(path, f"{column}: expected a finite time >= 0 s, found {text!r}", line=line)
    return value


class ArrivalOrder:
    """Enforces non-decreasing timestamps and makes them relative to the first row.

    Reading a part of a file (:meth:`TraceReader.read_part`), ``origin`` is the
    file's first row's timestamp, given; the part's first row is kept in
    ``first`` so :meth:`follows` can check it against the part before.
    """

    def __init__(self, path: Path, column: str, origin: float | None = None) -> None:
        self.path = path
        self.column = column
        self.origin = origin
        self.first: tuple[float, int, str | None] | None = None  # value, line, text
        self.last: float | None = None
        self.last_line = 0

    def check(self, value: float, line: int, text: str | None = None) -> None:
        last = self.last
        if last is None:
            self.first = (value, line, text)
            if self.origin is None:
                self.origin = value
        elif value < last:
            raise self._unsorted(value, text, line, self.last_line)
        self.last = value
        self.last_line = line

    def follows(self, last: float | None, last_line: int) -> None:
        """Check this part's first row against the previous part's last row."""
        if self.first is not None and last is not None and self.first[0] < last:
            value, line, text = self.first
            raise self._unsorted(value, text, line, last_line)

    def _unsorted(self, value: float, text: str | None, line: int, last_line: int) -> InputError:
        shown = text if text is not None else f"{value:g}"
        return InputError(
            self.path,
            f"{self.column} {shown} is earlier than the row on line {last_line}: "
            "rows must be sorted by arrival time (sort the file first)",
            line=line,
        )


def check_header(path: Path, found: list[str], required: tuple[str, ...], fmt: str) -> dict[str, int]:
    """Map column names to positions; a missing column names what was expected."""
    names = [c.strip() for c in found]
    index = {name: i for i, name in reversed(list(enumerate(names)))}
    missing = [c for c in required if c not in index]
    if missing:
        raise InputError(
            path,
            f"missing column(s) {', '.join(missing)} for a {fmt} CSV; "
            f"expected a header with {', '.join(required)}, found {', '.join(names) or 'nothing'}",
            line=1,
        )
    return index


def csv_rows(
    path: Path, required: tuple[str, ...], fmt: str
) -> Iterator[tuple[int, list[str], dict[str, int]]]:
    """The data rows of a CSV trace as ``(line, row, column index)``, blank lines
    skipped, after checking the header; a malformed file names its line."""
    with open_text(path, "a trace file") as fh:
        reader = csv.reader(fh)
        try:
            header = next(reader, None)
            if header is None:
                raise InputError(path, "empty file: expected a header " + ",".join(required), line=1)
            col = check_header(path, header, required, fmt)
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                yield reader.line_num, row, col
        except csv.Error as exc:
            raise InputError(path, f"malformed CSV: {exc}", line=reader.line_num) from None


def field(path: Path, row: list[str], index: int, column: str, line: int) -> str:
    if index >= len(row):
        raise InputError(
            path, f"expected a value for column {column}, the row has only {len(row)} fields", line=line
        )
    return row[index].strip()


def time_scaled(requests: Iterable[Request], factor: float, path: Path) -> Iterator[Request]:
    """``tickgate import --time-scale F``: each request's ``arrival_ms`` times ``factor`` (0.25:
    the same trace four times faster), for every format, a plugin's too. A ``deadline_ms`` keeps
    its slack after the arrival (the client's patience does not change with the load). A request
    timed in steps (``arrival_tick`` > 0, no ``arrival_ms``) cannot be scaled: steps are not time."""
    for request in requests:
        arrival = request.arrival_ms
        if arrival is None:
            if request.arrival_tick:
                raise InputError(
                    path,
                    f"request {request.id!r} arrives at step {request.arrival_tick}, not at a time; "
                    "--time-scale scales arrival_ms",
                )
            yield request
            continue
        scaled = arrival * factor
        if scaled > MAX_ARRIVAL_MS:
            raise InputError(
                path,
                f"request {request.id!r} would arrive at {scaled:g} ms with --time-scale {factor:g}; "
                f"a workload holds arrivals up to {MAX_ARRIVAL_MS:g} ms",
            )
        deadline = request.deadline_ms
        yield attrs.evolve(
            request,
            arrival_ms=scaled,
            deadline_ms=None if deadline is None else max(0.0, scaled + (deadline - arrival)),
        )
