"""Options of the ``vllm-v1`` scheduler: vLLM's own knob names and defaults."""

from __future__ import annotations

from typing import Any, Mapping

import attrs

_INT = {"type": "integer", "minimum": 1, "maximum": 1_000_000_000}

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["block_size", "num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens"],
    "properties": {
        "block_size": {**_INT, "maximum": 65536, "description": "Tokens per KV block (--block-size)."},
        "num_gpu_blocks": {**_INT, "minimum": 2,
                           "description": "KV blocks including vLLM's null block (usable = this - 1)."},
        "max_num_seqs": {**_INT, "description": "Requests running at once (--max-num-seqs)."},
        "max_num_batched_tokens": {**_INT, "description": "Token budget of one step (--max-num-batched-tokens)."},
        "enable_chunked_prefill": {"type": "boolean", "description": "Default true."},
        "enable_prefix_caching": {"type": "boolean", "description": "Default false."},
        "long_prefill_token_threshold": {"type": "integer", "minimum": 0, "maximum": 1_000_000_000,
                                         "description": "Cap on one request's tokens per step when more "
                                                        "than one request is in the engine (0: off)."},
        "watermark": {"type": "number", "minimum": 0, "maximum": 1,
                      "description": "Fraction of num_gpu_blocks kept free when admitting while others run."},
        "policy": {"enum": ["fcfs", "priority"], "description": "Waiting-queue order and preemption victim."},
        "max_model_len": {**_INT, "description": "Longest sequence; longer prompts are rejected, "
                                                 "outputs are capped (default: unlimited)."},
        "scheduler_reserve_full_isl": {"type": "boolean",
                                       "description": "Admit only if the whole prompt's blocks fit (default true, "
                                                      "as in vLLM 0.33)."},
        "max_span": {**_INT, "description": "tickgate only: cap on fast-forwarded identical steps "
                                           "(1 disables fast-forwarding; decisions never change)."},
    },
}


@attrs.frozen
class V1Config:
    block_size: int
    num_gpu_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = False
    long_prefill_token_threshold: int = 0
    watermark: float = 0.0
    policy: str = "fcfs"
    max_model_len: int | None = None
    scheduler_reserve_full_isl: bool = True
    max_span: int | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> "V1Config":
        return cls(**{k: options[k] for k in attrs.fields_dict(cls) if k in options})
