"""The ``sglang`` scheduler's options: SGLang's server arguments it mirrors
(their names and defaults, with the SGLang flag each stands for), the
defaults SGLang keeps in ``global_config``, and how the prefix block size is
chosen. Kept apart from the scheduler so its loop reads on its own, as
vllm-v1's ``v1.options`` is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tickgate import ConfigError, kv_capacity

from .schedule_policy import POLICIES

#: SGLang's CLIP_MAX_NEW_TOKENS_ESTIMATION default.
CLIP_MAX_NEW_TOKENS = 4096
#: SGLang's global_config.retract_decode_steps.
RETRACT_DECODE_STEPS = 20
#: SGLang's defaults for the new-token ratio (global_config).
DEFAULT_INIT_NEW_TOKEN_RATIO = 0.7
DEFAULT_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
DEFAULT_NEW_TOKEN_RATIO_DECAY_STEPS = 600

_INT = {"type": "integer", "minimum": 1, "maximum": 1_000_000_000}

OPTIONS_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["max_total_tokens"],
    "properties": {
        "page_size": {
            **_INT,
            "maximum": 65536,
            "description": "Tokens per KV page (SGLang --page-size, default 1).",
        },
        "max_total_tokens": {
            "anyOf": [_INT, {"const": "auto"}],
            "description": "KV pool size in tokens (SGLang --max-total-tokens), or auto: from "
            "GPU memory as SGLang profiles it (needs a timing model that knows "
            "the model and GPU, such as roofline).",
        },
        "mem_fraction_static": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "description": "With max_total_tokens: auto, the fraction of GPU memory for "
            "weights and KV (--mem-fraction-static; default by tensor "
            "parallel size, as SGLang 0.4.0: 0.88 at tp 1 ... 0.79 at 16).",
        },
        "max_running_requests": {
            **_INT,
            "description": "Requests in the running batch (--max-running-requests; default 4096).",
        },
        "max_prefill_tokens": {
            **_INT,
            "description": "Input tokens in one prefill batch after its first "
            "request (--max-prefill-tokens, default 16384).",
        },
        "chunked_prefill_size": {
            "type": "integer",
            "minimum": -1,
            "maximum": 1_000_000_000,
            "description": "Max tokens of one prefill chunk; -1 or 0 disables chunking "
            "(--chunked-prefill-size, default 8192).",
        },
        "context_length": {
            **_INT,
            "description": "Model context length; requests are capped at "
            "min(context_length, max_total_tokens) - 1 tokens.",
        },
        "schedule_policy": {
            "enum": list(POLICIES),
            "description": "Waiting-queue order (--schedule-policy, default fcfs).",
        },
        "schedule_conservativeness": {
            "type": "number",
            "minimum": 0,
            "maximum": 100,
            "description": "Scales init/min new_token_ratio (default 1.0).",
        },
        "init_new_token_ratio": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "Override: starting new_token_ratio (default min(0.7 * conservativeness, 1)).",
        },
        "min_new_token_ratio": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "Override: floor of new_token_ratio (default init * 0.14).",
        },
        "new_token_ratio_decay_steps": {
            **_INT,
            "description": "Decode steps to decay from init to min "
            "(SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS, default 600).",
        },
        "clip_max_new_tokens_estimation": {
            **_INT,
            "description": "Cap on max_new_tokens in the admission estimate (default 4096).",
        },
        "retract_decode_steps": {
            **_INT,
            "description": "Decode steps of headroom a retraction frees per "
            "remaining request (SGLANG_RETRACT_DECODE_STEPS, default 20).",
        },
        "ignore_eos": {
            "type": "boolean",
            "description": "Every request has SamplingParams.ignore_eos: admission "
            "reserves a running request's whole remaining output, not "
            "new_token_ratio of it, and with disable_radix_cache follows "
            "add_one_req_ignore_eos (SGLang 0.5.23; default false).",
        },
        "disable_radix_cache": {
            "type": "boolean",
            "description": "No prefix caching (--disable-radix-cache).",
        },
        "prefix_block_size": {
            **_INT,
            "description": "Tokens per workload prefix block id (prefix_blocks), for "
            "workloads without a block_size (theirs is used; "
            "default 16); a multiple of page_size.",
        },
        "random_seed": {
            "type": "integer",
            "minimum": 0,
            "maximum": 2**63 - 1,
            "description": "Seed of the 'random' policy's shuffle (default 0).",
        },
    },
}


def prefix_block_size(options: Mapping[str, Any], workload: int | None, page: int) -> int:
    """Tokens per workload prefix block id: the workload's own ``block_size``
    (what its ids were hashed over, as vllm-v1 uses it), else the option, else 16.
    An option that contradicts the workload is refused, not obeyed: a Mooncake
    id covers 512 tokens whatever a policy says."""
    option = options.get("prefix_block_size")
    if workload is not None and option is not None and option != workload:
        raise ConfigError(
            f'scheduler "sglang": scheduler.options.prefix_block_size {option} contradicts the '
            f"workload, whose prefix blocks cover {workload} tokens (its block_size); remove "
            "the option (the workload's size is used)"
        )
    size = workload if workload is not None else option if option is not None else 16
    if size % page:
        origin = "the workload's block_size" if workload is not None else "prefix_block_size"
        raise ConfigError(
            f'scheduler "sglang": {origin} {size} is not a multiple of page_size {page} '
            "(a prefix block must be whole pages)"
        )
    return size


def default_mem_fraction_static(tp: int) -> float:
    """SGLang 0.4.0's ``ServerArgs.__post_init__`` default for ``--mem-fraction-static``."""
    if tp >= 16:
        return 0.79
    if tp >= 8:
        return 0.81
    if tp >= 4:
        return 0.85
    if tp >= 2:
        return 0.87
    return 0.88


def resolve_max_total_tokens(
    options: Mapping[str, Any], timing: Any
) -> tuple[Mapping[str, Any], dict[str, Any] | None]:
    """``options`` with ``max_total_tokens: auto`` replaced by the pool SGLang would
    profile, and the report's ``kv_capacity`` (None for an explicit pool).

    SGLang (``ModelRunner.profile_max_num_token``): ``rest = free after weights -
    total * (1 - mem_fraction_static)``, ``tokens = rest // cell_size``, page-aligned
    (:func:`tickgate.kv_capacity`, "sglang"). Unless the policy sets them, the
    request limit uses the model's context length (``max_position_embeddings``)
    and ``max_running_requests`` is SGLang 0.5's default
    (``KVCacheConfigurator.resolve_max_num_reqs``):
    ``min(clamp(int(tokens / context_len * 512), 2048, 4096), tokens // 2)``."""
    fraction = options.get("mem_fraction_static")
    if options["max_total_tokens"] != "auto":
        if fraction is not None:
            raise ConfigError(
                "mem_fraction_static sizes the pool only with max_total_tokens: auto (an explicit "
                "max_total_tokens is the pool); remove one of them"
            )
        return options, None
    tp = int(getattr(timing, "tp", 1) or 1)
    fraction = default_mem_fraction_static(tp) if fraction is None else float(fraction)
    cap = kv_capacity(timing, "sglang", fraction, option="max_total_tokens")
    page = options.get("page_size", 1)
    tokens = cap.tokens // page * page
    if tokens < 2 * page:
        raise ConfigError(f"max_total_tokens: auto gives {cap.tokens} tokens, fewer than two pages of {page}")
    resolved = {k: v for k, v in options.items() if k != "mem_fraction_static"}
    resolved["max_total_tokens"] = tokens
    summary = {**cap.summary("mem_fraction_static"), "tokens": tokens, "page_size": page}
    context = options.get("context_length") or getattr(
        getattr(timing, "model", None), "max_position_embeddings", None
    )
    if context and "context_length" not in options:
        resolved["context_length"] = context
        summary["context_length"] = context
    if "max_running_requests" not in options:
        if not context:
            raise ConfigError(
                "max_total_tokens: auto derives max_running_requests from the context length; "
                "the model's config has no max_position_embeddings: set context_length "
                "(or max_running_requests)"
            )
        estimated = min(max(int(tokens / context * 512), 2048), 4096)
        resolved["max_running_requests"] = summary["max_running_requests"] = min(estimated, tokens // 2)
    return resolved, summary
