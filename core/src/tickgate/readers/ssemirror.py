"""Base classes for the engines' SSE-capture mirrors and evidence parsers.

An adapter subclasses these with its ``name``, ``backend``, ``sniff`` and
``version(facts)``; framing (:mod:`.sse`) and evidence (:mod:`.streams`) are
shared because the wire format is the OpenAI one for every engine. The
observation document carries one request per stream with its ``streaming``
evidence, and aggregates computed from those requests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from ..interfaces import BackendMirror, EvidenceParser
from .aggregate import from_requests
from .common import clean_aggregates, document, provenance, read_text
from .sse import frame
from .streams import StreamEvidence, collect, evidence_to_request


def read_capture(path: Path,
                 fmt: str = "OpenAI-compatible stream") -> tuple[list[StreamEvidence], dict[str, Any], str]:
    framed = frame(read_text(path), path)
    evidence, facts = collect(framed, path, fmt)
    return evidence, facts, framed.shape


def capture_notes(evidence: list[StreamEvidence], facts: dict[str, Any]) -> list[str]:
    notes = []
    if facts.get("cut_at_line"):
        notes.append(f"capture cut mid-way: the chunk starting on line {facts['cut_at_line']} is incomplete "
                     "and was dropped")
    partial = [e.request_id for e in evidence if not e.streaming["complete"]]
    if partial:
        notes.append(f"partial evidence: {len(partial)} stream(s) end before finish_reason or [DONE]")
    if any(e.streaming["timestamps"] == "none" for e in evidence):
        notes.append("no receive timestamps in the capture: no first-token time or gaps are given "
                     "(annotate events with ': recv_ms=<ms>' or use timed JSONL)")
    if not any(e.usage for e in evidence):
        notes.append("no usage in the stream (request without stream_options.include_usage): "
                     "token counts are content-chunk counts")
    return notes


class SseMirrorBase(BackendMirror):
    backend: ClassVar[str] = ""

    def version(self, facts: dict[str, Any], shape: str) -> str:
        raise NotImplementedError

    def read(self, path: Path) -> dict[str, Any]:
        evidence, facts, shape = read_capture(path, self.name)
        requests = [evidence_to_request(e, self.backend) for e in evidence]
        notes = capture_notes(evidence, facts)
        notes.append("run aggregates computed by tickgate from the streams")
        models = sorted({e.model for e in evidence if e.model})
        run = {"backend": self.backend, "model": models[0] if len(models) == 1 else None,
               "provenance": provenance(path, self.name, self.version(facts, shape), notes),
               "aggregates": clean_aggregates(from_requests(requests))}
        return document(run, requests)


class SseEvidenceBase(EvidenceParser):
    """``parse`` returns ``[{"request_id": ..., "streaming": {...}}]`` sorted by id."""

    def parse(self, path: Path) -> list[dict[str, Any]]:
        evidence, _, _ = read_capture(path, self.name)
        return [{"request_id": e.request_id, "streaming": e.streaming} for e in evidence]
