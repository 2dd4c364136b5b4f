"""The ``trtllm`` scheduler's options: TensorRT-LLM's knob names (``KvCacheConfig``,
``SchedulerConfig``, the executor's batch limits) and defaults, and ``kv_cache_max_tokens: auto``
resolved to the pool TensorRT-LLM would allocate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tickgate import (
    ConfigError,
    kv_capacity,
)

from .capacity import POLICIES
from .micro_batch import CHUNKING_POLICIES

_INT = {"type": "integer", "minimum": 1, "maximum": 1_000_000_000}


#: TensorRT-LLM's KvCacheConfig.free_gpu_memory_fraction default
DEFAULT_FREE_GPU_MEMORY_FRACTION = 0.9


OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "tokens_per_block": {
            **_INT,
            "maximum": 65536,
            "description": "Tokens per KV block (KvCacheConfig.tokens_per_block, default 32).",
        },
        "kv_cache_blocks": {
            **_INT,
            "description": "KV blocks in the pool (give this or kv_cache_max_tokens).",
        },
        "kv_cache_max_tokens": {
            "anyOf": [_INT, {"const": "auto"}],
            "description": "KV pool in tokens (KvCacheConfig.max_tokens); blocks = max_tokens "
            "// tokens_per_block. auto: from GPU memory as TensorRT-LLM sizes "
            "it (needs a timing model that knows the model and GPU, such as "
            "roofline).",
        },
        "kv_cache_free_gpu_mem_fraction": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "description": "With kv_cache_max_tokens: auto, the fraction of the "
            "memory free after weights and buffers given to the KV "
            "cache (KvCacheConfig.free_gpu_memory_fraction, "
            "default 0.9).",
        },
        "max_batch_size": {**_INT, "description": "Requests per step (default 2048)."},
        "max_num_tokens": {**_INT, "description": "Tokens per step, context plus generation (default 8192)."},
        "capacity_scheduler_policy": {
            "enum": list(POLICIES),
            "description": "SchedulerConfig.capacity_scheduler_policy (default GUARANTEED_NO_EVICT).",
        },
        "enable_chunked_context": {"type": "boolean", "description": "Chunk contexts (default false)."},
        "context_chunking_policy": {
            "enum": list(CHUNKING_POLICIES),
            "description": "SchedulerConfig.context_chunking_policy (default FIRST_COME_FIRST_SERVED).",
        },
        "max_context_length": {**_INT, "description": "Largest context chunk (optional)."},
        "enable_block_reuse": {
            "type": "boolean",
            "description": "KvCacheConfig.enable_block_reuse (default true): find prompt "
            "blocks again in the KV cache (needs prefix blocks or token ids "
            "in the workload).",
        },
        "enable_partial_reuse": {
            "type": "boolean",
            "description": "KvCacheConfig.enable_partial_reuse (default true): reuse the "
            "leading tokens of a block that matches only partly.",
        },
        "copy_on_partial_reuse": {
            "type": "boolean",
            "description": "KvCacheConfig.copy_on_partial_reuse (default true): a partly "
            "matching block in use is copied rather than skipped.",
        },
    },
}


def resolve_kv_cache_max_tokens(
    options: Mapping[str, Any], timing: Any
) -> tuple[Mapping[str, Any], dict[str, Any] | None]:
    """``options`` with ``kv_cache_max_tokens: auto`` replaced by the pool TensorRT-LLM
    would allocate, and the report's ``kv_capacity`` (None otherwise).

    TensorRT-LLM gives the KV cache ``free_gpu_memory_fraction`` of the memory
    still free once the weights and the runtime's buffers for a step of
    ``max_num_tokens`` tokens (and ``max_batch_size`` sampled rows) are allocated
    (:func:`tickgate.kv_capacity`, "trtllm"); whole blocks of ``tokens_per_block``."""
    fraction = options.get("kv_cache_free_gpu_mem_fraction")
    if options.get("kv_cache_max_tokens") != "auto":
        if fraction is not None:
            raise ConfigError(
                "kv_cache_free_gpu_mem_fraction sizes the pool only with kv_cache_max_tokens: auto "
                "(kv_cache_blocks / kv_cache_max_tokens are the pool); remove one of them"
            )
        return options, None
    if options.get("kv_cache_blocks") is not None:
        raise ConfigError("give exactly one of kv_cache_blocks and kv_cache_max_tokens")
    fraction = DEFAULT_FREE_GPU_MEMORY_FRACTION if fraction is None else float(fraction)
    tpb = options.get("tokens_per_block", 32)
    cap = kv_capacity(
        timing,
        "trtllm",
        fraction,
        step_tokens=options.get("max_num_tokens", 8192),
        step_seqs=options.get("max_batch_size", 2048),
        option="kv_cache_max_tokens",
    )
    blocks = cap.tokens // tpb
    if blocks < 1:
        raise ConfigError(
            f"kv_cache_max_tokens: auto gives {cap.tokens} tokens, less than one block of {tpb}"
        )
    resolved = {k: v for k, v in options.items() if k != "kv_cache_free_gpu_mem_fraction"}
    resolved["kv_cache_max_tokens"] = blocks * tpb
    summary = {
        **cap.summary("kv_cache_free_gpu_mem_fraction"),
        "tokens": blocks * tpb,
        "blocks": blocks,
        "tokens_per_block": tpb,
    }
    return resolved, summary
