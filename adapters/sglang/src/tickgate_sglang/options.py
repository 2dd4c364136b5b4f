"""The ``sglang`` scheduler's options: SGLang's server arguments it mirrors
(their names and defaults, with the SGLang flag each stands for), the
defaults SGLang keeps in ``global_config``, and how the prefix block size is
chosen. Kept apart from the scheduler so its loop reads on its own, as
vllm-v1's ``v1_options`` is.
"""

from __future__ import annotations

from typing import Any, Mapping

from tickgate import ConfigError

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
        "page_size": {**_INT, "maximum": 65536, "description": "Tokens per KV page (SGLang --page-size, default 1)."},
        "max_total_tokens": {**_INT, "description": "KV pool size in tokens (SGLang --max-total-tokens)."},
        "max_running_requests": {**_INT, "description": "Requests in the running batch (--max-running-requests; "
                                                        "default 4096)."},
        "max_prefill_tokens": {**_INT, "description": "Input tokens in one prefill batch after its first "
                                                      "request (--max-prefill-tokens, default 16384)."},
        "chunked_prefill_size": {"type": "integer", "minimum": -1, "maximum": 1_000_000_000,
                                 "description": "Max tokens of one prefill chunk; -1 or 0 disables chunking "
                                                "(--chunked-prefill-size, default 8192)."},
        "context_length": {**_INT, "description": "Model context length; requests are capped at "
                                                  "min(context_length, max_total_tokens) - 1 tokens."},
        "schedule_policy": {"enum": list(POLICIES), "description": "Waiting-queue order (--schedule-policy, "
                                                                   "default fcfs)."},
        "schedule_conservativeness": {"type": "number", "minimum": 0, "maximum": 100,
                                      "description": "Scales init/min new_token_ratio (default 1.0)."},
        "init_new_token_ratio": {"type": "number", "minimum": 0, "maximum": 1,
                                 "description": "Override: starting new_token_ratio "
                                                "(default min(0.7 * conservativeness, 1))."},
        "min_new_token_ratio": {"type": "number", "minimum": 0, "maximum": 1,
                                "description": "Override: floor of new_token_ratio (default init * 0.14)."},
        "new_token_ratio_decay_steps": {**_INT, "description": "Decode steps to decay from init to min "
                                                               "(SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS, default 600)."},
        "clip_max_new_tokens_estimation": {**_INT, "description": "Cap on max_new_tokens in the admission "
                                                                  "estimate (default 4096)."},
        "disable_radix_cache": {"type": "boolean", "description": "No prefix caching (--disable-radix-cache)."},
        "prefix_block_size": {**_INT, "description": "Tokens per workload prefix block id (prefix_blocks), for "
                                                     "workloads without a block_size (theirs is used; "
                                                     "default 16); a multiple of page_size."},
        "random_seed": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1,
                        "description": "Seed of the 'random' policy's shuffle (default 0)."},
    },
}


def prefix_block_size(options: Mapping[str, Any], workload: int | None, page: int) -> int:
    """Tokens per workload prefix block id: the workload's own ``block_size``
    (what its ids were hashed over, as vllm-v1 uses it), else the option, else 16.
    An option that contradicts the workload is refused, not obeyed: a Mooncake
    id covers 512 tokens whatever a policy says."""
    option = options.get("prefix_block_size")
    if workload is not None and option is not None and option != workload:
        raise ConfigError(f'scheduler "sglang": scheduler.options.prefix_block_size {option} contradicts the '
                          f"workload, whose prefix blocks cover {workload} tokens (its block_size); remove "
                          "the option (the workload's size is used)")
    size = workload if workload is not None else option if option is not None else 16
    if size % page:
        origin = ("the workload's block_size" if workload is not None else "prefix_block_size")
        raise ConfigError(f'scheduler "sglang": {origin} {size} is not a multiple of page_size {page} '
                          "(a prefix block must be whole pages)")
    return size
