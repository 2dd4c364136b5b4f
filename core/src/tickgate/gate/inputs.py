"""Read the two sides of a gate: a bundle, or two files that are each a
neutral observations document or any engine-native file an installed backend
mirror reads.

:func:`load_observations` is the reusable piece (``tickgate normalize`` uses
it): neutral documents are used as they are; anything else goes to the
registered backend mirrors, and exactly one must claim the file by ``sniff``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import InputError
from ..plugins import Registry
from ..schemas import load_schema, validate
from ..readers.common import read_head, read_text
from .jsonscan import Scanner
from .fastpath import add_batch
from .observations import Side, check_envelope, side_from_document

NEUTRAL = "neutral"
NEUTRAL_KIND = "tickgate.observations"
BUNDLE_KIND = "tickgate.gate-bundle"
#: observation files can be large (a million requests is ~250 MB of JSON)
MAX_OBSERVATION_BYTES = 4 * 1024**3
#: requests checked together by the column-wise fast path
BATCH = 2048


def looks_neutral(head: bytes, kind: str = NEUTRAL_KIND) -> bool:
    """A JSON object whose head names the neutral kind."""
    text = head.lstrip()
    return text.startswith(b"{") and f'"{kind}"'.encode() in text


def load_observations(path: Path | str, format: str = "auto", *,
                      registry: Registry | None = None) -> dict[str, Any]:
    """Read ``path`` into a neutral observations document (a dict valid against
    ``schemas/observations.schema.json``) through the registered backend
    mirrors: the one named by ``format``, or the one whose ``sniff`` claims the
    file (the core's ``neutral`` mirror reads neutral documents). ``FILE#LINE``
    picks one run of an appended JSONL results file."""
    from ..readers.detect import read_observations

    return read_observations(path, format, registry)


class _SideReader:
    """Fold an observations object into a Side while the scanner walks it."""

    def __init__(self, sc: Scanner, label: str) -> None:
        self.sc = sc
        self.side = Side(label, str(sc.path))
        self._where = (0, 0, "$")

    def _fail(self, sub: str, message: str) -> InputError:
        index, pos, base = self._where
        return self.sc.fail(pos, message, f"{base}[{index}]" + (f".{sub}" if sub else ""))

    def _each(self, item: Any, index: int, pos: int) -> None:
        self._batch.append(item)
        self._positions.append(pos)
        if len(self._batch) >= BATCH:
            self._flush()

    def _flush(self) -> None:
        """Column-wise fast path; the exact per-request path when it declines."""
        batch, positions = self._batch, self._positions
        if batch and not add_batch(self.side, batch):
            base, first = self._where[2], self._first
            for offset, (item, pos) in enumerate(zip(batch, positions)):
                self._where = (first + offset, pos, base)
                self.side.add(item, self._fail)
        self._first += len(batch)
        self._batch, self._positions = [], []

    def _run(self, values: list[Any]) -> bool:
        """A run of requests decoded in one call: ingest column-wise or decline."""
        self._flush()  # keep request order
        if add_batch(self.side, values):
            self._first += len(values)
            return True
        return False

    def _requests(self, pos: int, json_path: str) -> int:
        self._where = (0, pos, json_path)
        self._batch: list[Any] = []
        self._positions: list[int] = []
        self._first = 0
        end = self.sc.items(pos, json_path, self._each, self._run)
        self._flush()
        return end

    def read(self, pos: int, json_path: str) -> tuple[Side, int]:
        start = self.sc.skip(pos)
        other, end = self.sc.members(start, json_path, {"requests": self._requests})
        parts = tuple(p for p in json_path.lstrip("$").split(".") if p)
        try:
            check_envelope(other, self.sc.path, parts)
        except InputError as exc:
            line, col = self.sc.where(start)
            raise InputError(self.sc.path, exc.message, line=line, column=col,
                             json_path=exc.json_path) from None
        self.side.run = other["run"]
        self.side.has_requests = bool(self.side.ids)
        self.side.finish()
        return self.side, end


def read_side(path: Path | str, label: str, format: str = "auto", *,
              registry: Registry | None = None) -> Side:
    """One side of a gate. A neutral document is streamed straight into
    columns (observation files can hold a million requests); any other file
    goes through :func:`load_observations`."""
    from ..readers.detect import split_selector

    base, line = split_selector(path)
    if line is None and format in ("auto", NEUTRAL) and looks_neutral(read_head(base)):
        sc = Scanner(read_text(base, limit=MAX_OBSERVATION_BYTES), base)
        side, end = _SideReader(sc, label).read(0, "$")
        sc.finish(end)
        return side
    return side_from_document(load_observations(path, format, registry=registry), label, str(base))


def read_bundle(path: Path | str) -> tuple[Side, Side]:
    """A gate bundle (``schemas/gate-bundle.schema.json``): both sides in one file."""
    path = Path(path)
    sc = Scanner(read_text(path, limit=MAX_OBSERVATION_BYTES), path)
    sides: dict[str, Side] = {}

    def handler(label: str) -> Any:
        def read(pos: int, json_path: str) -> int:
            side, end = _SideReader(sc, label).read(pos, json_path)
            sides[label] = side
            return end
        return read

    start = sc.skip(0)
    other, end = sc.members(start, "$", {"baseline": handler("baseline"), "candidate": handler("candidate")})
    sc.finish(end)
    schema = load_schema("gate-bundle.schema.json")
    envelope = {**other, **{k: {"version": 1, "kind": NEUTRAL_KIND, "run": {}} for k in sides}}
    validate(envelope, schema, file=path, line=1)
    return sides["baseline"], sides["candidate"]
