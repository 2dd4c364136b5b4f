"""Step-by-step comparison of the ``vllm-v1`` mirror with a recorded run of the
real vLLM scheduler (the per-step JSONL of ``../shared/tools/vllm-reference``).

Inputs use the reference harness's formats (its README documents them): a
workload ``{"config": {...}, "requests": [{"id", "arrival_step", "prompt_len"
| "prompt_token_ids", "max_output_len", "priority"}]}``, an optional config
JSON overriding the workload's, and the steps JSONL. The mirror replays the
workload through the registered ``vllm-v1`` plugin (looked up like any
third-party plugin) with one observed record per step, and each step's
decisions are compared field by field.

The mirror runs with its fast paths on, as a replay does: spans of decode
steps and the decode group hand the observer one line per engine step they
cover (:mod:`.observe`), so the recording checks them too; ``slow_path``
(``--slow-path``) runs the full step at every step instead (``max_span: 1``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tickgate import (
    ConformanceSpec,
    Request,
    compare_steps as _shared_compare,
    conformance_command,
    load_reference_workload as _shared_load,
    observe_mirror,
    read_reference_steps as _shared_read,
)

#: drive_vllm.py's DEFAULT_CONFIG (vLLM 0.33 reference harness)
HARNESS_DEFAULTS: dict[str, Any] = {
    "block_size": 16,
    "num_gpu_blocks": 1024,
    "max_num_seqs": 16,
    "max_num_batched_tokens": 2048,
    "enable_chunked_prefill": True,
    "enable_prefix_caching": False,
    "policy": "fcfs",
    "long_prefill_token_threshold": 0,
    "max_model_len": 8192,
    "watermark": 0.0,
    "scheduler_reserve_full_isl": True,
    # drive_vllm.py's OPTIONAL_CONFIG for speculative decoding (v1.spec; off at K = 0)
    "num_speculative_tokens": 0,
    "spec_method": "ngram",
    "acceptance_rates": 0.7,
    "seed": 0,
    # ... and for CPU KV offload (v1.offload; off at 0 chunks)
    "kv_offload_cpu_blocks": 0,
    "kv_offload_extra_config": {},
    "kv_offload_load_steps": 0,
    "kv_offload_store_steps": 1,
}
#: the config keys that are vllm-v1 options only with speculative decoding on
SPEC_KEYS = ("num_speculative_tokens", "spec_method", "acceptance_rates", "seed")
#: ... only with CPU KV offload on
OFFLOAD_KEYS = (
    "kv_offload_cpu_blocks",
    "kv_offload_extra_config",
    "kv_offload_load_steps",
    "kv_offload_store_steps",
)

#: per-step fields compared, in the order a divergence is reported
BASE_FIELDS = (
    "sched",
    "preempted",
    "finished",
    "free_blocks_after_sched",
    "running_after_sched",
    "free_blocks",
    "running",
    "waiting",
)
#: the harness's speculative-decoding fields, compared when a line has them (None otherwise)
SPEC_FIELDS = ("spec", "drafts", "skip_drafts")
#: the harness's CPU KV offload fields, compared when a line has them; GPU block ids are
#: vLLM's own numbering, so kv_load / kv_store entries compare their count of blocks
OFFLOAD_FIELDS = ("kv_lookup", "kv_admit", "kv_load", "kv_store", "kv_flush", "kv_done", "waiting_for_kv")
COMPARED = BASE_FIELDS + SPEC_FIELDS + OFFLOAD_FIELDS


def _check_config(raw: dict[str, Any], path: Path, prefix: tuple[str, ...]) -> None:
    """One source of the config, checked against the scheduler's option schema where it is written."""
    from tickgate import validate

    from .v1.options import OPTIONS_SCHEMA

    validate(raw, {**OPTIONS_SCHEMA, "required": []}, file=path, prefix=prefix)


def _norm(step: dict[str, Any]) -> dict[str, Any]:
    """Fields compared; a running request's computed-token count is not a decision."""
    out = {k: step[k] for k in BASE_FIELDS}
    for k in SPEC_FIELDS + OFFLOAD_FIELDS:
        out[k] = step.get(k)
    out["sched"] = [s[:3] if s[2] == "running" else s[:4] for s in step["sched"]]
    for k in ("kv_load", "kv_store"):
        if out[k] is not None:  # [req_id, job, (sync,) GPU blocks -> their count, CPU chunks]
            out[k] = [[*e[:-2], len(e[-2]) if isinstance(e[-2], list) else e[-2], e[-1]] for e in out[k]]
    return out


def load_reference_workload(path: Path, config_path: Path | None) -> tuple[list[Request], dict[str, Any]]:
    """Requests in the harness's arrival order (arrival_step, then file order) and the config."""
    return _shared_load(path, config_path, SPEC)


def read_steps(path: Path) -> Iterator[dict[str, Any]]:
    """The reference steps, validated line by line."""
    return _shared_read(path, SPEC)


def compare(reference: list[dict[str, Any]], mirror: list[dict[str, Any]]) -> dict[str, Any]:
    """Compare aligned steps; describe the first divergence in words."""
    return _shared_compare(reference, mirror, SPEC)


def scheduler_options(config: dict[str, Any]) -> dict[str, Any]:
    """The harness config as ``vllm-v1`` options (same knob names); the
    speculative-decoding and offload keys only when they are on."""
    spec = config.get("num_speculative_tokens", 0) > 0
    offload = config.get("kv_offload_cpu_blocks", 0) > 0
    return {
        k: config[k]
        for k in HARNESS_DEFAULTS
        if (spec or k not in SPEC_KEYS) and (offload or k not in OFFLOAD_KEYS)
    }


def run_mirror(
    requests: list[Request], config: dict[str, Any], *, slow_path: bool = False
) -> list[dict[str, Any]]:
    """Replay through the registered ``vllm-v1`` plugin, one observed line per step:
    with its fast paths (default), or the full step at every step (``slow_path``)."""
    return run_mirror_paths(requests, config, slow_path)[0]


def run_mirror_paths(
    requests: list[Request], config: dict[str, Any], slow_path: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:func:`run_mirror`, and how the report counts the mirror's steps: built by a
    fast path's expansion, by the full step, or the drain steps inserted after it."""
    options = scheduler_options(config)
    if slow_path:
        options["max_span"] = 1  # no span, no decode group: every step in full
    spec = None
    if options.get("num_speculative_tokens", 0) > 0:
        # an empty step's skip_drafts: S.can_skip_drafts (drafters with lookahead slots)
        spec = {
            "spec": [],
            "drafts": [],
            "skip_drafts": options.get("spec_method") in ("eagle", "draft_model"),
        }
    mirrors: list[Any] = []
    lines = observe_mirror("vllm-v1", options, requests, "vLLM", built=mirrors.append)
    fast = mirrors[0].observed_fast_steps
    out = with_drain_steps(lines, spec)
    return out, {
        "mirror_path": "slow" if slow_path else "fast",
        "mirror_fast_path_steps": fast,
        "mirror_full_steps": len(lines) - fast,
        "mirror_drain_steps": len(out) - len(lines),
    }


def with_drain_steps(lines: list[dict[str, Any]], spec: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Add the empty steps vLLM's engine runs after the last requests finish.

    ``Scheduler.has_requests()`` stays true while finished request ids are
    waiting to be reported to the workers, so EngineCore runs one more
    ``schedule()`` that schedules nothing. It decides nothing, so the mirror
    does not model it as a step; the comparison inserts it.
    """
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        out.append(line)
        if line["finished"] and line["running"] == 0 and line["waiting"] == 0:
            step = line["step"] + 1
            if i + 1 < len(lines) and lines[i + 1]["step"] == step:
                continue
            free = line["free_blocks"]
            out.append(
                {
                    "step": step,
                    "sched": [],
                    "num_tokens": 0,
                    "preempted": [],
                    "finished": [],
                    "free_blocks_after_sched": free,
                    "running_after_sched": 0,
                    "free_blocks": free,
                    "running": 0,
                    "waiting": 0,
                    **(spec or {}),
                }
            )
    return out


SPEC = ConformanceSpec(
    engine="vllm",
    label="vLLM",
    defaults=HARNESS_DEFAULTS,
    fields=COMPARED,
    norm=_norm,
    run_mirror=lambda requests, config: run_mirror(requests, config),  # noqa: PLW0108 -- looked up per call
    check_config=_check_config,
    run_mirror_paths=run_mirror_paths,
    required=BASE_FIELDS,
)

#: ``tickgate conformance vllm``
vllm_command = conformance_command(SPEC, harness="vllm-reference", driver="drive_vllm.py")
