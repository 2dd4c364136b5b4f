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

from ..host.registry import Registry
from ..readers.common import read_head
from ..util.errors import InputError
from ..util.jsonstream import JsonStream, json_key
from ..util.locations import open_binary, rereadable
from ..util.schemas import load_schema, validate
from .batch_columns import add_batch
from .observations import Side, check_envelope, side_from_document

NEUTRAL = "neutral"
NEUTRAL_KIND = "tickgate.observations"
BUNDLE_KIND = "tickgate.gate-bundle"


def looks_neutral(head: bytes, kind: str = NEUTRAL_KIND) -> bool:
    """A JSON object whose head names the neutral kind."""
    text = head.lstrip()
    return text.startswith(b"{") and f'"{kind}"'.encode() in text


def load_observations(
    path: Path | str, format: str = "auto", *, registry: Registry | None = None
) -> dict[str, Any]:
    """Read ``path`` into a neutral observations document (a dict valid against
    ``schemas/observations.schema.json``) through the registered backend
    mirrors: the one named by ``format``, or the one whose ``sniff`` claims the
    file (the core's ``neutral`` mirror reads neutral documents). ``FILE#LINE``
    picks one run of an appended JSONL results file."""
    from .detect import read_observations

    return read_observations(path, format, registry)


class _SideReader:
    """Fold an observations object into a Side while the stream walks it."""

    def __init__(self, s: JsonStream, label: str) -> None:
        self.s = s
        self.side = Side(label, str(s.path))
        self._where = (0, 0, "$")  # request index, its place in the batch, the array's JSON path

    def _fail(self, sub: str, message: str) -> InputError:
        index, k, base = self._where
        line, col = self.s.element_position(k)
        return InputError(
            self.s.path,
            message,
            line=line,
            column=col,
            json_path=f"{base}[{index}]" + (f".{sub}" if sub else ""),
        )

    def _requests(self, json_path: str) -> None:
        """Column-wise fast path per batch; the exact per-request path where it declines."""
        index = 0
        for batch in self.s.elements(json_path, item="a request", array="the requests list"):
            if not add_batch(self.side, batch):
                for k, item in enumerate(batch):
                    self._where = (index + k, k, json_path)
                    self.side.add(item, self._fail)
            index += len(batch)

    def read(self, json_path: str) -> Side:
        s = self.s
        s.peek()
        start = s.where(s.pos)
        other: dict[str, Any] = {}
        for name in s.members(json_path):
            member = f"{json_path}.{json_key(name)}"
            if name == "requests":
                self._requests(member)
            else:
                other[name] = s.value(member)
        parts = tuple(p for p in json_path.lstrip("$").split(".") if p)
        try:
            check_envelope(other, s.path, parts)
        except InputError as exc:
            raise InputError(
                s.path, exc.message, line=start[0], column=start[1], json_path=exc.json_path
            ) from None
        self.side.run = other["run"]
        self.side.has_requests = bool(self.side.ids)
        self.side.finish()
        return self.side


def read_side(
    path: Path | str, label: str, format: str = "auto", *, registry: Registry | None = None
) -> Side:
    """One side of a gate. A neutral document is streamed straight into
    columns (observation files can hold a million requests); any other file
    goes through :func:`load_observations`."""
    from .detect import name_file, split_selector

    base, line = split_selector(path, registry)
    with rereadable(base, "an observations file") as readable:  # a pipe: read once, looked at twice
        if line is None and format in ("auto", NEUTRAL) and looks_neutral(read_head(readable)):
            with open_binary(readable, "an observations file") as fh:
                s = JsonStream(fh, base)
                side = _SideReader(s, label).read("$")
                s.at_end()
            return side
        selected = readable if line is None else f"{readable}#{line}"
        doc = load_observations(selected, format, registry=registry)
    name_file(doc, readable, base)
    return side_from_document(doc, label, str(base))


def read_bundle(path: Path | str) -> tuple[Side, Side]:
    """A gate bundle (``schemas/gate-bundle.schema.json``): both sides in one file."""
    path = Path(path)
    sides: dict[str, Side] = {}
    other: dict[str, Any] = {}
    with open_binary(path, "a gate bundle") as fh:
        s = JsonStream(fh, path)
        for name in s.members("$"):
            member = f"$.{json_key(name)}"
            if name in ("baseline", "candidate"):
                sides[name] = _SideReader(s, name).read(member)
            else:
                other[name] = s.value(member)
        s.at_end()
    schema = load_schema("gate-bundle.schema.json")
    envelope = {**other, **{k: {"version": 1, "kind": NEUTRAL_KIND, "run": {}} for k in sides}}
    validate(envelope, schema, file=path, line=1)
    return sides["baseline"], sides["candidate"]
