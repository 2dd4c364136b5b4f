"""Attach streaming evidence from token-stream captures to observations.

A benchmark client's results rarely carry per-token timing; an SSE capture of
the same traffic does. The registered evidence parsers (kind
``evidence_parser``) turn a capture into per-request ``streaming`` evidence,
which is joined to the observations by request id: this is the evidence the
gate's ``streaming-evidence`` signal checks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..host.registry import PluginInfo, Registry, get_registry
from ..util.errors import InputError, PluginError, TickgateError
from ..util.locations import rereadable
from .common import read_head

KIND = "evidence_parser"


def choose_parser(path: Path, format: str = "auto", registry: Registry | None = None) -> PluginInfo:
    registry = registry or get_registry()
    known = ", ".join(registry.names(KIND)) or "none installed"
    if format != "auto":
        if format not in registry.names(KIND):
            raise InputError(path, f'unknown evidence format "{format}"; known: {known}')
        return registry.get(KIND, format)
    head = read_head(path)
    claims = []
    for info in registry.of_kind(KIND):
        try:
            if info.obj().sniff(path, head):
                claims.append(info)
        except Exception as exc:
            raise PluginError(
                f"{info.label('evidence parser')} failed to sniff {path}: {type(exc).__name__}: {exc}"
            ) from exc
    if len(claims) != 1:
        which = "no" if not claims else f"several ({', '.join(c.name for c in claims)})"
        raise InputError(
            path,
            f"{which} evidence parsers recognise this capture; known: {known} "
            "(choose one with --evidence-format NAME)",
        )
    return claims[0]


def parse_evidence(
    path: Path, format: str = "auto", registry: Registry | None = None
) -> list[dict[str, Any]]:
    """The streaming evidence of the capture ``path``; a pipe is read once into
    memory (its parser is chosen from its head before it parses it)."""
    with rereadable(path, "a token-stream capture") as readable:
        return _parse(readable, format, registry)


def _parse(path: Path, format: str, registry: Registry | None) -> list[dict[str, Any]]:
    info = choose_parser(path, format, registry)
    try:
        items = info.obj().parse(path)
    except TickgateError:
        raise
    except Exception as exc:
        raise PluginError(
            f"{info.label('evidence parser')} failed to parse {path}: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and isinstance(i.get("request_id"), str) and isinstance(i.get("streaming"), dict)
        for i in items
    ):
        raise PluginError(
            f"{info.label('evidence parser')} returned something other than a list of "
            "{request_id, streaming} entries for " + str(path)
        )
    return items


def _warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def attach_evidence(
    doc: dict[str, Any],
    captures: list[Path],
    format: str = "auto",
    registry: Registry | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Join each capture's evidence to ``doc``'s requests by request id (in place).

    A capture none of whose streams matches an observed request is an error (a
    wrong evidence file must not pass unnoticed); a partial match is accepted
    and ``warn`` (default: a ``warning:`` line on stderr) gets the count of
    stream ids left unmatched. Every capture also leaves a provenance note.
    """
    warn = warn or _warn
    requests = doc.get("requests")
    if not requests:
        raise InputError(
            captures[0],
            "streaming evidence joins per-request observations; the "
            "normalized input has run-level aggregates only",
        )
    by_id = {r["request_id"]: r for r in requests}
    prov = doc["run"].setdefault("provenance", {"format": "neutral"})
    observed = prov.get("file") or "the observations"
    notes = prov.setdefault("notes", [])
    for path in captures:
        items = parse_evidence(path, format, registry)
        unmatched = [item for item in items if item["request_id"] not in by_id]
        matched = len(items) - len(unmatched)
        if items and not matched:
            raise InputError(
                path,
                f"no stream matches a request of {observed}: 0 of {len(items)} stream ids "
                f"found among its {len(by_id)} requests (evidence from another run?)",
            )
        for item in items:
            target = by_id.get(item["request_id"])
            if target is not None:
                target["streaming"] = item["streaming"]
        if unmatched:
            warn(
                f"{path}: {len(unmatched)} of {len(items)} stream ids are not requests of {observed} "
                f"({matched} matched); their evidence is not attached"
            )
        notes.append(
            f"streaming evidence from {path}: {matched} requests matched"
            + (f", {len(unmatched)} stream ids not in the observations" if unmatched else "")
        )
    return doc
