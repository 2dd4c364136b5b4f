"""``sglang-sse``: SGLang's OpenAI-compatible streams.

SGLang ids are bare 32-hex strings, choices carry ``matched_stop``, deltas may
carry ``reasoning_content`` (counted as generated tokens), and usage arrives
either on the finish chunk (~0.4), in a separate ``choices: []`` chunk (0.5),
or as ``"usage": null`` on every chunk until the last. Captures saved as JSONL
of chunk payloads (no ``data:`` prefix) are read too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from tickgate.readers.common import head_text
from tickgate.readers.sse import looks_like_chunks
from tickgate.readers.ssemirror import SseEvidenceBase, SseMirrorBase

_SGLANG = re.compile(r'"matched_stop"|"id"\s*:\s*"[0-9a-f]{32}"')


def sniff_sglang_sse(head: bytes) -> bool:
    return looks_like_chunks(head) and bool(_SGLANG.search(head_text(head)))


def version(facts: dict[str, Any], shape: str) -> str:
    parts = ["+".join(facts["objects"]) or "chunks"]
    if facts["usage_chunk_without_choices"]:
        parts.append("separate-usage-chunk")
    elif facts["usage_on_finish_chunk"]:
        parts.append("usage-on-finish-chunk")
    elif facts["usage_on_content_chunk"]:
        parts.append("continuous-usage")
    else:
        parts.append("no-usage")
    if facts["reasoning"]:
        parts.append("reasoning_content")
    if shape != "sse":
        parts.append(shape)
    return "; ".join(parts)


class SglangSseMirror(SseMirrorBase):
    name: ClassVar[str] = "sglang-sse"
    description: ClassVar[str] = "SGLang OpenAI-compatible SSE/JSONL capture -> per-request streaming evidence"
    backend: ClassVar[str] = "sglang"

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_sglang_sse(head)

    def version(self, facts: dict[str, Any], shape: str) -> str:
        return version(facts, shape)


class SglangSseEvidence(SseEvidenceBase):
    name: ClassVar[str] = "sglang-sse"
    description: ClassVar[str] = "first-token time, gaps, token counts, finish reason, usage from SGLang streams"

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_sglang_sse(head)
