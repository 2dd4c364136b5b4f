"""The ``neutral`` backend mirror: tickgate's own observation format, so that
auto-detection covers files ``tickgate normalize`` already wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ..interfaces import BackendMirror
from ..util.locations import load_json
from .common import head_text


class NeutralMirror(BackendMirror):
    name: ClassVar[str] = "neutral"
    description: ClassVar[str] = "tickgate observations JSON (schemas/observations.schema.json)"
    declared_kind: ClassVar[str] = "tickgate.observations"

    def sniff(self, path: Path, head: bytes) -> bool:
        text = head_text(head).lstrip()
        return text.startswith("{") and '"tickgate.observations"' in text

    def read(self, path: Path) -> dict[str, Any]:
        from ..util.schemas import load_schema, validate

        doc = load_json(path, limit=64 * 1024 * 1024)
        validate(doc, load_schema("observations.schema.json"), file=path)
        prov = doc["run"].setdefault("provenance", {"format": "neutral"})
        prov.setdefault("file", str(path))
        prov.setdefault("format_version", "1")
        return doc
