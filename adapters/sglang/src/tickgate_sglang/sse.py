"""``sglang-sse``: SGLang's OpenAI-compatible streams.

SGLang ids are bare 32-hex strings, choices carry ``matched_stop``, deltas may
carry ``reasoning_content`` (counted as generated tokens), and usage arrives
either on the finish chunk (~0.4), in a separate ``choices: []`` chunk (0.5),
or as ``"usage": null`` on every chunk until the last. Captures saved as JSONL
of chunk payloads (no ``data:`` prefix) are read too.
"""

from __future__ import annotations

import re
from typing import ClassVar

from tickgate import SseDialect, SseEvidenceBase, SseMirrorBase

SGLANG = SseDialect(
    claims=re.compile(r'"matched_stop"|"id"\s*:\s*"[0-9a-f]{32}"'),
    refuses=None,
    usage=(
        ("usage_chunk_without_choices", "separate-usage-chunk"),
        ("usage_on_finish_chunk", "usage-on-finish-chunk"),
        ("usage_on_content_chunk", "continuous-usage"),
    ),
    reasoning=True,
)


class SglangSseMirror(SseMirrorBase):
    name: ClassVar[str] = "sglang-sse"
    description: ClassVar[str] = (
        "SGLang OpenAI-compatible SSE/JSONL capture -> per-request streaming evidence"
    )
    backend: ClassVar[str] = "sglang"
    dialect: ClassVar[SseDialect] = SGLANG


class SglangSseEvidence(SseEvidenceBase):
    name: ClassVar[str] = "sglang-sse"
    description: ClassVar[str] = (
        "first-token time, gaps, token counts, finish reason, usage from SGLang streams"
    )
    dialect: ClassVar[SseDialect] = SGLANG
