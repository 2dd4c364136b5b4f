"""Format auto-detection over the registered backend mirrors, and the one
function that turns any supported file into a neutral observation document.

Mirrors are registered as classes (like every other plugin kind) and
instantiated without arguments for each use. Every mirror's ``sniff`` sees the first 64 KiB of the
file. Exactly one must claim it: none or several is an error listing the formats known, so a user
can force one with ``--format NAME``. Built-in readers get no special
treatment: they are found in the registry like any third party's.

``FILE#LINE`` selects one run of an appended JSONL results file (bench clients
append one line per run); without it a mirror reads the last run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..host.registry import PluginInfo, Registry, get_registry
from ..interfaces import optional_attribute
from ..readers.common import read_head
from ..util.errors import InputError, PluginError, TickgateError
from ..util.locations import rereadable

KIND = "backend_mirror"
_SELECTOR = re.compile(r"^(?P<base>.+)#(?P<line>[1-9][0-9]*)$")
_DECLARED = re.compile(rb'"kind"\s*:\s*"([^"\\]{1,100})"')


def split_selector(path: Path | str, registry: Registry | None = None) -> tuple[Path, int | None]:
    """``results.jsonl#3`` -> (results.jsonl, 3) when no file has the literal name; a client's
    artifact directory -> the file in it a backend mirror reads (:func:`artifact_file`)."""
    p = Path(path)
    m = _SELECTOR.match(str(path))
    if m and not p.exists():
        return Path(m.group("base")), int(m.group("line"))
    if p.is_dir():
        return artifact_file(p, registry), None
    return p, None


def artifact_file(directory: Path, registry: Registry | None = None) -> Path:
    """The file a benchmark client's artifact directory is read through: the first of a mirror's
    ``artifact_files`` the directory holds, or, when it holds none, its one subdirectory does
    (genai-perf writes ``artifacts/<model>-<endpoint>-<mode>/``). Files of two formats, or
    several subdirectories with such files, are an error that lists them: name the file."""
    registry = registry or get_registry()
    wanted = [
        (info.name, name)
        for info in registry.of_kind(KIND)
        for name in optional_attribute(info.obj, "artifact_files")
    ]
    if not wanted:
        raise InputError(
            directory, "is a directory, and no installed backend mirror reads artifact directories"
        )

    def found(folder: Path) -> dict[str, Path]:
        first: dict[str, Path] = {}
        for fmt, name in wanted:
            if fmt not in first and (folder / name).is_file():
                first[fmt] = folder / name
        return first

    here = found(directory)
    if not here:
        subfolders = sorted(p for p in directory.iterdir() if p.is_dir() and found(p))
        if len(subfolders) > 1:
            names = ", ".join(p.name for p in subfolders)
            raise InputError(directory, f"holds the artifacts of several runs ({names}): name one of them")
        here = found(subfolders[0]) if subfolders else {}
    if not here:
        known = ", ".join(sorted({name for _, name in wanted}))
        raise InputError(
            directory, f"is a directory without a file a backend mirror reads (looked for {known})"
        )
    if len(here) > 1:
        files = ", ".join(str(p) for p in here.values())
        raise InputError(directory, f"holds files of several formats ({files}): name the file")
    return next(iter(here.values()))


def _known(registry: Registry) -> str:
    return ", ".join(registry.names(KIND)) or "none installed"


def detect_format(path: Path | str, registry: Registry | None = None) -> PluginInfo:
    """The one backend mirror whose ``sniff`` claims the file."""
    registry = registry or get_registry()
    path, _ = split_selector(path, registry)
    head = read_head(path)
    if not head.strip():
        raise InputError(path, f"empty file; nothing to normalize (known formats: {_known(registry)})")
    declared = _DECLARED.search(head[:4096])
    if declared is not None:
        kind = declared.group(1).decode("utf-8", "replace")
        owners = [i for i in registry.of_kind(KIND) if optional_attribute(i.obj, "declared_kind") == kind]
        if len(owners) == 1:
            return owners[0]
    matches = []
    for info in registry.of_kind(KIND):
        try:
            claimed = bool(info.obj().sniff(path, head))
        except Exception as exc:  # a plugin bug must not become a traceback
            raise PluginError(
                f"{info.label('backend mirror')} failed to sniff {path}: {type(exc).__name__}: {exc}"
            ) from exc
        if claimed:
            matches.append(info)
    if not matches:
        raise InputError(
            path, f"matches no known format; known formats: {_known(registry)} (force one with --format NAME)"
        )
    if len(matches) > 1:
        names = ", ".join(m.name for m in matches)
        raise InputError(path, f"matches several formats ({names}); choose one with --format NAME")
    return matches[0]


def mirror(name: str, registry: Registry | None = None, path: Path | str | None = None) -> PluginInfo:
    registry = registry or get_registry()
    if name not in registry.names(KIND):
        raise InputError(path, f'unknown format "{name}"; known formats: {_known(registry)}')
    return registry.get(KIND, name)


def read_observations(
    path: Path | str, format: str = "auto", registry: Registry | None = None
) -> dict[str, Any]:
    """Read any supported file as a schema-valid observation document. A file
    that cannot be read twice (a pipe) is read once into memory first: its
    format is detected from its head before its reader reads it
    (:func:`~tickgate.util.locations.rereadable`)."""
    registry = registry or get_registry()
    base, line = split_selector(path, registry)
    with rereadable(base, "an observations file") as readable:
        doc = _read_observations(readable if line is None else f"{readable}#{line}", format, registry)
    name_file(doc, readable, base)
    return doc


def name_file(doc: dict[str, Any], read: Path, path: Path) -> None:
    """The document of ``path``, read through its stand-in ``read``
    (:func:`~tickgate.util.locations.rereadable`), names ``path`` as its file."""
    provenance = doc.get("run", {}).get("provenance")
    if read != path and isinstance(provenance, dict) and provenance.get("file") == str(read):
        provenance["file"] = str(path)


def _read_observations(path: Path | str, format: str, registry: Registry) -> dict[str, Any]:
    from .observations import side_from_document

    base, line = split_selector(path, registry)
    info = detect_format(path, registry) if format == "auto" else mirror(format, registry, base)
    label = info.label("backend mirror")
    try:
        reader = info.obj()
        if line is not None:
            if not optional_attribute(reader, "accepts_line"):
                raise InputError(
                    path,
                    f'format "{info.name}" holds one run per file; "#LINE" selects a run '
                    "only in appended JSONL results",
                )
            doc = reader.read(base, line=line)
        else:
            doc = reader.read(base)
    except TickgateError:
        raise
    except Exception as exc:  # a plugin bug must not become a traceback
        raise PluginError(f"{label} failed to read {base}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("run"), dict):
        raise PluginError(f"{label} returned no observation run for {base}")
    prov = doc["run"].setdefault("provenance", {})
    prov.setdefault("file", str(base))
    prov.setdefault("format", info.name)
    if info.name != "neutral":
        prov["distribution"] = info.distribution
    try:
        # the gate's checker: JSON Schema for the envelope, a hand-written
        # equivalent for the requests (~50x faster on 100k requests)
        side_from_document(doc, "observations", str(base))
    except InputError as exc:
        if optional_attribute(info.obj, "declared_kind"):
            raise  # the file itself is an observations document: its own error, located
        # a mirror's output is plugin data: an invalid document is the mirror's to fix
        raise PluginError(
            f"{label} returned an invalid observations document for {base}: {exc.json_path}: {exc.message}"
        ) from None
    return doc
