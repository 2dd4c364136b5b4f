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

from ..errors import InputError, PluginError, TickgateError
from ..plugins import PluginInfo, Registry, get_registry
from ..schemas import load_schema, validate
from .jsonscan import Scanner
from .fastpath import add_batch
from .observations import Side, check_envelope, side_from_document

NEUTRAL = "neutral"
NEUTRAL_KIND = "tickgate.observations"
BUNDLE_KIND = "tickgate.gate-bundle"
HEAD_BYTES = 64 * 1024
#: observation files can be large (a million requests is ~250 MB of JSON)
MAX_OBSERVATION_BYTES = 4 * 1024**3
#: requests checked together by the column-wise fast path
BATCH = 2048


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(HEAD_BYTES)
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, expected a file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None


def _read_text(path: Path) -> str:
    try:
        if path.stat().st_size > MAX_OBSERVATION_BYTES:
            raise InputError(path, f"file is larger than {MAX_OBSERVATION_BYTES} bytes")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start})") from None
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, "is a directory, expected a file") from None
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None


def looks_neutral(head: bytes, kind: str = NEUTRAL_KIND) -> bool:
    """A JSON object whose head names the neutral kind."""
    text = head.lstrip()
    return text.startswith(b"{") and f'"{kind}"'.encode() in text


def _mirrors(registry: Registry) -> list[PluginInfo]:
    return registry.of_kind("backend_mirror")


def _known_formats(registry: Registry) -> str:
    return ", ".join([NEUTRAL, *registry.names("backend_mirror")])


def choose_mirror(path: Path, format: str = "auto", *, registry: Registry | None = None) -> PluginInfo | None:
    """The backend mirror that reads ``path`` (None: a neutral document).

    ``format`` "auto" sniffs: a neutral document wins outright; otherwise
    exactly one mirror must claim the file."""
    head = _head(path)
    registry = registry or get_registry()
    if format == NEUTRAL:
        return None
    if format != "auto":
        if format not in registry.names("backend_mirror"):
            raise InputError(path, f"unknown format {format!r}; known formats: {_known_formats(registry)}")
        return registry.get("backend_mirror", format)
    if looks_neutral(head):
        return None
    claims = []
    for info in _mirrors(registry):
        try:
            claimed = info.obj().sniff(path, head)
        except TickgateError:
            raise
        except Exception as exc:
            raise PluginError(f'backend mirror "{info.name}" from {info.distribution} {info.version} '
                              f"failed to sniff {path}: {type(exc).__name__}: {exc}") from exc
        if claimed:
            claims.append(info.name)
    if len(claims) == 1:
        return registry.get("backend_mirror", claims[0])
    if not claims:
        raise InputError(path, "not a neutral observations document and no installed backend mirror "
                         f"recognises it; known formats: {_known_formats(registry)} "
                         "(pass --format to choose one)")
    raise InputError(path, f"several backend mirrors claim this file ({', '.join(claims)}); "
                     f"pass --format with one of: {_known_formats(registry)}")


def _read_mirror(info: PluginInfo, path: Path) -> dict[str, Any]:
    try:
        doc = info.obj().read(path)
    except TickgateError:
        raise
    except Exception as exc:
        raise PluginError(f'backend mirror "{info.name}" from {info.distribution} {info.version} '
                          f"failed to read {path}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(doc, dict):
        raise PluginError(f'backend mirror "{info.name}" from {info.distribution} {info.version} '
                          f"returned {type(doc).__name__}, not an observations document, for {path}")
    return doc


def _mirror_side(info: PluginInfo, path: Path, label: str) -> Side:
    return _check_mirror_document(info, path, _read_mirror(info, path), label)


def _check_mirror_document(info: PluginInfo, path: Path, doc: dict[str, Any],
                           label: str = "observations") -> Side:
    """A mirror's output is plugin data: an invalid document is the plugin's fault."""
    try:
        return side_from_document(doc, label, str(path))
    except InputError as exc:
        raise PluginError(f'backend mirror "{info.name}" from {info.distribution} {info.version} '
                          f"returned an invalid observations document for {path}: "
                          f"{exc.json_path}: {exc.message}") from None


def load_observations(path: Path | str, format: str = "auto", *,
                      registry: Registry | None = None) -> dict[str, Any]:
    """Read ``path`` into a neutral observations document (a dict valid against
    ``schemas/observations.schema.json``), through a backend mirror if needed."""
    path = Path(path)
    info = choose_mirror(path, format, registry=registry)
    if info is None:
        from ..locations import parse_json

        doc = parse_json(_read_text(path), path)
        side_from_document(doc, "observations", str(path))  # validates every request
        return doc
    doc = _read_mirror(info, path)
    _check_mirror_document(info, path, doc)
    return doc


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
    """One side of a gate, streamed into columns when the file is neutral."""
    path = Path(path)
    info = choose_mirror(path, format, registry=registry)
    if info is not None:
        return _mirror_side(info, path, label)
    sc = Scanner(_read_text(path), path)
    side, end = _SideReader(sc, label).read(0, "$")
    sc.finish(end)
    return side


def read_bundle(path: Path | str) -> tuple[Side, Side]:
    """A gate bundle (``schemas/gate-bundle.schema.json``): both sides in one file."""
    path = Path(path)
    sc = Scanner(_read_text(path), path)
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
