"""Step-by-step comparison of the ``sglang`` mirror with a recorded run of the real
SGLang 0.5.23 scheduler (the per-step JSONL of ``../shared/tools/sglang-reference``,
whose README documents the formats).

The workload and config use the harness's keys (SGLang's own knob names); they
become ``sglang`` scheduler options (:func:`scheduler_options`), the workload is
replayed through the registered plugin with one observed line per step, and the
lines are compared field by field (:mod:`tickgate.conformance.check` does the rest,
shared with ``tickgate conformance vllm``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tickgate import ConformanceSpec, InputError, Request, conformance_command, observe_mirror

#: drive_sglang.py's DEFAULT_CONFIG (SGLang 0.5.23 reference harness)
HARNESS_DEFAULTS: dict[str, Any] = {
    "page_size": 1,
    "max_total_tokens": 16384,
    "max_running_requests": 64,
    "max_prefill_tokens": 16384,
    "chunked_prefill_size": 2048,
    "schedule_policy": "fcfs",
    "schedule_conservativeness": 1.0,
    "disable_radix_cache": False,
    "context_length": 8192,
    "random_seed": 0,
    "init_new_token_ratio": 0.7,
    "min_new_token_ratio_factor": 0.14,
    "new_token_ratio_decay_steps": 600,
    "retract_decode_steps": 20,
    "clip_max_new_tokens_estimation": 4096,
    "ignore_eos": False,
}

#: per-step fields compared, in the order a divergence is reported (all the harness logs but ``arrived``)
COMPARED = (
    "batch",
    "admitted",
    "chunk_continued",
    "decoding",
    "retracted",
    "finished",
    "aborted",
    "chunked",
    "free_tokens_after_sched",
    "free_tokens",
    "evictable_tokens",
    "protected_tokens",
    "new_token_ratio",
    "running",
    "waiting",
)

_INT_KEYS = (
    "page_size",
    "max_total_tokens",
    "max_running_requests",
    "max_prefill_tokens",
    "chunked_prefill_size",
    "context_length",
    "random_seed",
    "new_token_ratio_decay_steps",
    "retract_decode_steps",
    "clip_max_new_tokens_estimation",
)
_NUMBER_KEYS = ("schedule_conservativeness", "init_new_token_ratio", "min_new_token_ratio_factor")
_BOOL_KEYS = ("disable_radix_cache", "ignore_eos")


def _check_config(raw: dict[str, Any], path: Path, prefix: tuple[str, ...]) -> None:
    """Each key's type where it is written; the ranges are the scheduler's options'
    (checked by the options schema when the mirror is built)."""
    where = "$" + "".join(f".{p}" for p in prefix)
    for key, value in raw.items():
        if key in _INT_KEYS:
            ok = type(value) is int
            expected = "an integer"
        elif key in _NUMBER_KEYS:
            ok = type(value) in (int, float)
            expected = "a number"
        elif key in _BOOL_KEYS:
            ok = type(value) is bool
            expected = "true or false"
        else:  # schedule_policy
            from .schedule_policy import POLICIES

            ok = value in POLICIES
            expected = f"one of {list(POLICIES)}"
        if not ok:
            raise InputError(path, f"expected {expected}, found {value!r}", json_path=f"{where}.{key}")


def scheduler_options(config: dict[str, Any]) -> dict[str, Any]:
    """The harness config as ``sglang`` options: the env knobs become the ratios
    SGLang derives from them (``NewTokenRatioTracker.from_config``). The harness's
    requests carry token ids or a length, never workload prefix blocks, so
    ``prefix_block_size`` is never read; it is set to the first multiple of the
    page from 16 so that pages above 16 tokens pass the whole-pages check."""
    init = min(config["init_new_token_ratio"] * config["schedule_conservativeness"], 1.0)
    page = config["page_size"]
    return {
        "prefix_block_size": -(-16 // page) * page,
        "page_size": config["page_size"],
        "max_total_tokens": config["max_total_tokens"],
        "max_running_requests": config["max_running_requests"],
        "max_prefill_tokens": config["max_prefill_tokens"],
        "chunked_prefill_size": config["chunked_prefill_size"],
        "context_length": config["context_length"],
        "schedule_policy": config["schedule_policy"],
        "schedule_conservativeness": config["schedule_conservativeness"],
        "init_new_token_ratio": init,
        "min_new_token_ratio": min(init * config["min_new_token_ratio_factor"], 1.0),
        "new_token_ratio_decay_steps": config["new_token_ratio_decay_steps"],
        "retract_decode_steps": config["retract_decode_steps"],
        "clip_max_new_tokens_estimation": config["clip_max_new_tokens_estimation"],
        "disable_radix_cache": config["disable_radix_cache"],
        "random_seed": config["random_seed"],
        "ignore_eos": config["ignore_eos"],
    }


def norm(line: dict[str, Any]) -> dict[str, Any]:
    """The compared fields; lists keep their order (batch order is a decision)."""
    return {k: line[k] for k in COMPARED}


def run_mirror(requests: list[Request], config: dict[str, Any]) -> list[dict[str, Any]]:
    """Replay through the registered ``sglang`` plugin, one observed line per step."""
    return observe_mirror("sglang", scheduler_options(config), requests, "SGLang")


SPEC = ConformanceSpec(
    engine="sglang",
    label="SGLang",
    defaults=HARNESS_DEFAULTS,
    fields=COMPARED,
    norm=norm,
    run_mirror=run_mirror,
    check_config=_check_config,
)

#: ``tickgate conformance sglang``
sglang_command = conformance_command(SPEC, harness="sglang-reference", driver="drive_sglang.py")
