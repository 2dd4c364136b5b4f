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
from pathlib import Path
from typing import Any, ClassVar

from tickgate.readers.common import head_text
from tickgate.readers.sse import looks_like_chunks
from tickgate.readers.ssemirror import SseEvidenceBase, SseMirrorBase

_VLLM_ID = re.compile(r'"id"\s*:\s*"(chatcmpl|cmpl)-')
_SGLANG = re.compile(r'"matched_stop"|"id"\s*:\s*"[0-9a-f]{32}"')


def sniff_vllm_sse(head: bytes) -> bool:
    text = head_text(head)
    return looks_like_chunks(head) and bool(_VLLM_ID.search(text)) and not _SGLANG.search(text)


def version(facts: dict[str, Any], shape: str) -> str:
    parts = ["+".join(facts["objects"]) or "chunks"]
    if facts["usage_on_content_chunk"]:
        parts.append("continuous-usage")
    elif facts["usage_chunk_without_choices"]:
        parts.append("final-usage-chunk")
    else:
        parts.append("no-usage")
    if shape != "sse":
        parts.append(shape)
    return "; ".join(parts)


class VllmSseMirror(SseMirrorBase):
    name: ClassVar[str] = "vllm-sse"
    description: ClassVar[str] = "vLLM OpenAI-compatible SSE capture -> per-request streaming evidence"
    backend: ClassVar[str] = "vllm"

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_vllm_sse(head)

    def version(self, facts: dict[str, Any], shape: str) -> str:
        return version(facts, shape)


class VllmSseEvidence(SseEvidenceBase):
    name: ClassVar[str] = "vllm-sse"
    description: ClassVar[str] = "first-token time, gaps, token counts, finish reason, usage from vLLM streams"

    def sniff(self, path: Path, head: bytes) -> bool:
        return sniff_vllm_sse(head)
