"""Options of the ``vllm-v1`` scheduler: vLLM's own knob names and defaults,
and ``num_gpu_blocks: auto`` (:func:`resolve_num_gpu_blocks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from tickgate import ConfigError, kv_capacity

from .offload_options import OFFLOAD_OPTIONS
from .spec import SPEC_OPTIONS

_INT = {"type": "integer", "minimum": 1, "maximum": 1_000_000_000}
#: vLLM's default --gpu-memory-utilization
DEFAULT_GPU_MEMORY_UTILIZATION = 0.9

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["block_size", "num_gpu_blocks", "max_num_seqs", "max_num_batched_tokens"],
    "properties": {
        "block_size": {**_INT, "maximum": 65536, "description": "Tokens per KV block (--block-size)."},
        "num_gpu_blocks": {
            "anyOf": [{**_INT, "minimum": 2}, {"const": "auto"}],
            "description": "KV blocks including vLLM's null block (usable = this - 1), or "
            "auto: from GPU memory as vLLM profiles it (needs a timing model "
            "that knows the model and GPU, such as roofline).",
        },
        "gpu_memory_utilization": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "description": "With num_gpu_blocks: auto, the fraction of GPU memory vLLM "
            "may use (--gpu-memory-utilization, default 0.9).",
        },
        "max_num_seqs": {**_INT, "description": "Requests running at once (--max-num-seqs)."},
        "max_num_batched_tokens": {
            **_INT,
            "description": "Token budget of one step (--max-num-batched-tokens).",
        },
        "enable_chunked_prefill": {"type": "boolean", "description": "Default true."},
        "enable_prefix_caching": {"type": "boolean", "description": "Default false."},
        "long_prefill_token_threshold": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1_000_000_000,
            "description": "Cap on one request's tokens per step when more "
            "than one request is in the engine (0: off).",
        },
        "watermark": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "Fraction of num_gpu_blocks kept free when admitting while others run.",
        },
        "policy": {"enum": ["fcfs", "priority"], "description": "Waiting-queue order and preemption victim."},
        "max_model_len": {
            **_INT,
            "description": "Longest sequence; longer prompts are rejected, "
            "outputs are capped (default: unlimited).",
        },
        "scheduler_reserve_full_isl": {
            "type": "boolean",
            "description": "Admit only if the whole prompt's blocks fit (default true, as in vLLM 0.33).",
        },
        "max_span": {
            **_INT,
            "description": "tickgate only: cap on fast-forwarded identical steps "
            "(1 disables fast-forwarding; decisions never change).",
        },
        **SPEC_OPTIONS,
        **OFFLOAD_OPTIONS,
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
    # speculative decoding (v1.spec; off while num_speculative_tokens is 0)
    num_speculative_tokens: int = 0
    spec_method: str = "ngram"
    acceptance_rates: Any = 0.7
    seed: int = 0
    spec_drafter_cost: float | None = None
    # CPU KV offload (v1.offload; off while kv_offload_cpu_blocks is 0)
    kv_offload_cpu_blocks: int = 0
    kv_offload_extra_config: Any = None
    kv_offload_load_steps: int = 0
    kv_offload_store_steps: int = 1
    kv_offload_host_bandwidth_gb_s: float | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> V1Config:
        cfg = cls(**{k: options[k] for k in attrs.fields_dict(cls) if k in options})
        cfg.verify()
        return cfg

    def verify(self) -> None:
        """Refuse what vLLM 0.33 refuses when it starts (``SchedulerConfig.verify_max_model_len``
        in ``vllm/config/scheduler.py``), instead of failing later on one request."""
        mnbt, mml = self.max_num_batched_tokens, self.max_model_len
        if not self.enable_chunked_prefill and (mml is None or mnbt < mml):
            given = "unset (vLLM then takes the model's context length)" if mml is None else str(mml)
            raise ConfigError(
                f"with enable_chunked_prefill false, vLLM refuses max_num_batched_tokens "
                f"({mnbt}) smaller than max_model_len ({given}): a whole prompt must fit one "
                "step; raise max_num_batched_tokens, or set max_model_len to at most it",
                option="max_num_batched_tokens",
            )
        if mnbt < self.max_num_seqs:
            raise ConfigError(
                f"vLLM refuses max_num_batched_tokens ({mnbt}) smaller than max_num_seqs "
                f"({self.max_num_seqs})",
                option="max_num_batched_tokens",
            )
        if mml is not None and self.long_prefill_token_threshold > mml:
            raise ConfigError(
                f"vLLM refuses long_prefill_token_threshold ({self.long_prefill_token_threshold}) "
                f"greater than max_model_len ({mml})",
                option="long_prefill_token_threshold",
            )


def resolve_num_gpu_blocks(
    options: Mapping[str, Any], timing: Any
) -> tuple[Mapping[str, Any], dict[str, Any] | None]:
    """``options`` with ``num_gpu_blocks: auto`` replaced by the blocks vLLM would
    allocate, and the report's ``kv_capacity`` (None for an explicit count).

    vLLM (``Worker.determine_available_memory``, ``kv_cache_utils.get_num_blocks``):
    the KV cache gets ``total * gpu_memory_utilization`` minus the weights, the
    torch peak of profiling one step of ``max_num_batched_tokens`` tokens and
    non-torch memory, and ``num_blocks = available // page_size // num_layers``;
    the null block is one of those blocks, so ``num_gpu_blocks`` is that count
    (usable = this - 1), nothing added."""
    util = options.get("gpu_memory_utilization")
    if options["num_gpu_blocks"] != "auto":
        if util is not None:
            raise ConfigError(
                "gpu_memory_utilization sizes the pool only with num_gpu_blocks: auto (an "
                "explicit num_gpu_blocks is vLLM's num_gpu_blocks_override); remove one of them"
            )
        return options, None
    util = DEFAULT_GPU_MEMORY_UTILIZATION if util is None else float(util)
    block = options["block_size"]
    cap = kv_capacity(
        timing,
        "vllm",
        util,
        step_tokens=options["max_num_batched_tokens"],
        step_seqs=options["max_num_seqs"],
        option="num_gpu_blocks",
    )
    blocks = cap.tokens // block
    if blocks < 2:
        raise ConfigError(
            f"num_gpu_blocks: auto gives {blocks} blocks of {block} tokens "
            f"({cap.kv_bytes / 1e9:.2f} GB for the KV cache); vLLM needs at least 2 "
            "(raise gpu_memory_utilization or use a larger GPU / more tensor parallelism)"
        )
    summary = {
        **cap.summary("gpu_memory_utilization"),
        "tokens": blocks * block,
        "blocks": blocks,
        "block_size": block,
    }
    resolved = {k: v for k, v in options.items() if k != "gpu_memory_utilization"}
    return {**resolved, "num_gpu_blocks": blocks}, summary
