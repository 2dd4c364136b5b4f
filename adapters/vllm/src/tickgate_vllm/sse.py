"""``vllm-sse``: vLLM's OpenAI-compatible streams (chat and completions).

vLLM ids are ``chatcmpl-...`` (``cmpl-...`` for chat in V0-era releases and
for completions), completion choices carry vLLM's ``stop_reason``, non-final
chunks have ``"usage": null`` when ``include_usage`` is set, usage comes in a
final ``choices: []`` chunk before ``[DONE]`` (or on every chunk with
``continuous_usage_stats``). SGLang's markers (``matched_stop``, bare 32-hex
ids) are left to the ``sglang-sse`` reader.
"""

from __future__ import annotations

import re
from typing import ClassVar

from tickgate import SseDialect, SseEvidenceBase, SseMirrorBase

VLLM = SseDialect(
    claims=re.compile(r'"id"\s*:\s*"(chatcmpl|cmpl)-'),
    refuses=re.compile(r'"matched_stop"|"id"\s*:\s*"[0-9a-f]{32}"'),  # SGLang's
    usage=(
        ("usage_on_content_chunk", "continuous-usage"),
        ("usage_chunk_without_choices", "final-usage-chunk"),
    ),
)


class VllmSseMirror(SseMirrorBase):
    name: ClassVar[str] = "vllm-sse"
    description: ClassVar[str] = "vLLM OpenAI-compatible SSE capture -> per-request streaming evidence"
    backend: ClassVar[str] = "vllm"
    dialect: ClassVar[SseDialect] = VLLM


class VllmSseEvidence(SseEvidenceBase):
    name: ClassVar[str] = "vllm-sse"
    description: ClassVar[str] = (
        "first-token time, gaps, token counts, finish reason, usage from vLLM streams"
    )
    dialect: ClassVar[SseDialect] = VLLM
