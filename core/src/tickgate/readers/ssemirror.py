"""Base classes for the engines' SSE-capture mirrors and evidence parsers.

An adapter subclasses these with its ``name``, ``backend`` and ``dialect``
(an :class:`SseDialect`: what marks its engine's streams and how it names
their usage layout); framing (:mod:`.sse`) and evidence (:mod:`.streams`) are
shared because the wire format is the OpenAI one for every engine. The
observation document carries one request per stream with its ``streaming``
evidence, and aggregates computed from those requests.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ..interfaces import BackendMirror, EvidenceParser
from .aggregate import from_requests
from .common import clean_aggregates, document, head_text, provenance, read_text
from .sse import frame, looks_like_chunks
from .streams import StreamEvidence, collect, evidence_to_request


def read_capture(
    path: Path, fmt: str = "OpenAI-compatible stream"
) -> tuple[list[StreamEvidence], dict[str, Any], str]:
    framed = frame(read_text(path), path)
    evidence, facts = collect(framed, path, fmt)
    return evidence, facts, framed.shape


def capture_notes(evidence: list[StreamEvidence], facts: dict[str, Any]) -> list[str]:
    notes = []
    if facts.get("cut_at_line"):
        notes.append(
            f"capture cut mid-way: the chunk starting on line {facts['cut_at_line']} is incomplete "
            "and was dropped"
        )
    partial = [e.request_id for e in evidence if not e.streaming["complete"]]
    if partial:
        notes.append(f"partial evidence: {len(partial)} stream(s) end before finish_reason or [DONE]")
    if any(e.streaming["timestamps"] == "none" for e in evidence):
        notes.append(
            "no receive timestamps in the capture: no first-token time or gaps are given "
            "(annotate events with ': recv_ms=<ms>' or use timed JSONL)"
        )
    if not any(e.usage for e in evidence):
        notes.append(
            "no usage in the stream (request without stream_options.include_usage): "
            "token counts are content-chunk counts"
        )
    return notes


@attrs.frozen
class SseDialect:
    """One engine's OpenAI-compatible streams, as its mirror and its evidence
    parser both recognise and describe them.

    ``claims``: a pattern the head of a capture must contain (the engine's id
    shape, its extra fields); ``refuses``: one it must not (another engine's
    markers), or None. ``usage``: ``(fact, label)`` pairs in the order they
    name the capture's usage layout (the first fact that holds wins; none:
    ``no-usage``); ``reasoning``: whether ``reasoning_content`` deltas are
    named in the version too.
    """

    claims: re.Pattern[str]
    refuses: re.Pattern[str] | None
    usage: tuple[tuple[str, str], ...]
    reasoning: bool = False

    def sniff(self, head: bytes) -> bool:
        text = head_text(head)
        return (
            looks_like_chunks(head)
            and bool(self.claims.search(text))
            and not (self.refuses is not None and self.refuses.search(text))
        )

    def version(self, facts: dict[str, Any], shape: str) -> str:
        """``objects; usage layout[; reasoning_content][; shape]`` of a capture."""
        parts = ["+".join(facts["objects"]) or "chunks"]
        parts.append(next((label for fact, label in self.usage if facts[fact]), "no-usage"))
        if self.reasoning and facts["reasoning"]:
            parts.append("reasoning_content")
        if shape != "sse":
            parts.append(shape)
        return "; ".join(parts)


class SseMirrorBase(BackendMirror):
    backend: ClassVar[str] = ""
    dialect: ClassVar[SseDialect]

    def sniff(self, path: Path, head: bytes) -> bool:
        return self.dialect.sniff(head)

    def version(self, facts: dict[str, Any], shape: str) -> str:
        return self.dialect.version(facts, shape)

    def read(self, path: Path) -> dict[str, Any]:
        evidence, facts, shape = read_capture(path, self.name)
        requests = [evidence_to_request(e, self.backend) for e in evidence]
        notes = capture_notes(evidence, facts)
        notes.append("run aggregates computed by tickgate from the streams")
        models = sorted({e.model for e in evidence if e.model})
        run = {
            "backend": self.backend,
            "model": models[0] if len(models) == 1 else None,
            "provenance": provenance(path, self.name, self.version(facts, shape), notes),
            "aggregates": clean_aggregates(from_requests(requests)),
        }
        return document(run, requests)


class SseEvidenceBase(EvidenceParser):
    """``parse`` returns ``[{"request_id": ..., "streaming": {...}}]`` sorted by id."""

    dialect: ClassVar[SseDialect]

    def sniff(self, path: Path, head: bytes) -> bool:
        return self.dialect.sniff(head)

    def parse(self, path: Path) -> list[dict[str, Any]]:
        evidence, _, _ = read_capture(path, self.name)
        return [{"request_id": e.request_id, "streaming": e.streaming} for e in evidence]
