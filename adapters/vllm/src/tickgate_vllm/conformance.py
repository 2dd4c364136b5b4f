"""Step-by-step comparison of the ``vllm-v1`` mirror with a recorded run of the
real vLLM scheduler (the per-step JSONL of ``../shared/tools/vllm-reference``).

Inputs use the reference harness's formats (its README documents them): a
workload ``{"config": {...}, "requests": [{"id", "arrival_step", "prompt_len"
| "prompt_token_ids", "max_output_len", "priority"}]}``, an optional config
JSON overriding the workload's, and the steps JSONL. The mirror replays the
workload through the registered ``vllm-v1`` plugin (looked up like any
third-party plugin) with one observed record per step, and each step's
decisions are compared field by field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from tickgate import InputError, Request, load_json, parse_json

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
}

#: per-step fields compared, in the order a divergence is reported
COMPARED = ("sched", "preempted", "finished", "free_blocks_after_sched", "running_after_sched",
            "free_blocks", "running", "waiting")


def load_reference_workload(path: Path, config_path: Path | None) -> tuple[list[Request], dict[str, Any]]:
    """Requests in the harness's arrival order (arrival_step, then file order) and the config."""
    data = load_json(path)
    if isinstance(data, list):
        data = {"requests": data}
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
        raise InputError(path, "expected a list of requests or {\"config\": {...}, \"requests\": [...]}",
                         json_path="$")
    config = dict(HARNESS_DEFAULTS)
    config.update(_config(data.get("config", {}), path, ("config",)))
    if config_path is not None:
        config.update(_config(load_json(config_path), config_path, ()))
    items = []
    for i, item in enumerate(data["requests"]):
        items.append((_int(item, "arrival_step", path, i, 0), i, _request(item, path, i)))
    items.sort(key=lambda t: (t[0], t[1]))
    return [r for _, _, r in items], config


def _config(raw: Any, path: Path, prefix: tuple[str, ...]) -> dict[str, Any]:
    """One source of the config (the workload's ``config`` or ``--config``),
    checked against the scheduler's option schema where it is written."""
    from tickgate import validate

    from .v1_options import OPTIONS_SCHEMA

    where = "$" + "".join(f".{p}" for p in prefix)
    if not isinstance(raw, dict):
        raise InputError(path, "the config must be a JSON object", json_path=where)
    unknown = sorted(set(raw) - set(HARNESS_DEFAULTS))
    if unknown:
        raise InputError(path, f"unknown config keys {unknown}; expected some of {sorted(HARNESS_DEFAULTS)}",
                         json_path=where)
    validate(raw, {**OPTIONS_SCHEMA, "required": []}, file=path, prefix=prefix)
    return dict(raw)


def _int(item: Any, key: str, path: Path, i: int, default: int | None = None) -> int:
    if not isinstance(item, dict):
        raise InputError(path, "expected a request object", json_path=f"$.requests[{i}]")
    value = item.get(key, default)
    if type(value) is not int or value < 0:
        found = "it is missing" if key not in item else f"found {value!r}"
        raise InputError(path, f"expected a non-negative integer, {found}", json_path=f"$.requests[{i}].{key}")
    return value


def _request(item: Any, path: Path, i: int) -> Request:
    where = f"$.requests[{i}]"
    rid = item.get("id") if isinstance(item, dict) else None
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        raise InputError(path, "expected an id (string)", json_path=f"{where}.id")
    ids = item.get("prompt_token_ids")
    if ids is not None:
        if not isinstance(ids, list) or not ids or not all(type(t) is int and t >= 0 for t in ids):
            raise InputError(path, "expected a non-empty list of token ids", json_path=f"{where}.prompt_token_ids")
        prompt = len(ids)
    else:
        prompt = _int(item, "prompt_len", path, i)
    out = _int(item, "max_output_len", path, i)
    prio = item.get("priority", 0)
    if type(prio) is not int:
        raise InputError(path, f"expected an integer, found {prio!r}", json_path=f"{where}.priority")
    if prompt < 1 or out < 1:
        raise InputError(path, "prompt and max_output_len must be at least 1", json_path=where)
    return Request(id=str(rid), prompt_tokens=prompt, max_output_tokens=out, priority=prio,
                   arrival_tick=_int(item, "arrival_step", path, i, 0),
                   prompt_token_ids=tuple(ids) if ids is not None else None)


def read_steps(path: Path) -> Iterator[dict[str, Any]]:
    """The reference steps, validated line by line."""
    try:
        fh = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            line = parse_json(raw, path, line_offset=lineno - 1)
            if not isinstance(line, dict) or "step" not in line:
                raise InputError(path, "expected a step object with 'step'", line=lineno)
            missing = [k for k in COMPARED if k not in line]
            if missing:
                raise InputError(path, f"step line lacks {missing}", line=lineno)
            yield line


def _norm(step: dict[str, Any]) -> dict[str, Any]:
    """Fields compared; a running request's computed-token count is not a decision."""
    out = {k: step[k] for k in COMPARED}
    out["sched"] = [s[:3] if s[2] == "running" else s[:4] for s in step["sched"]]
    return out


def compare(reference: list[dict[str, Any]], mirror: list[dict[str, Any]]) -> dict[str, Any]:
    """Compare aligned steps; describe the first divergence in words."""
    identical = 0
    first: dict[str, Any] | None = None
    for i, ref in enumerate(reference):
        mine = mirror[i] if i < len(mirror) else None
        if mine is not None and mine["step"] == ref["step"] and _norm(mine) == _norm(ref):
            identical += 1
            continue
        if first is None:
            first = _describe(i, ref, mine)
    if first is None and len(mirror) > len(reference):
        extra = mirror[len(reference)]
        first = {"index": len(reference), "step": extra["step"], "field": "steps",
                 "description": f"the mirror ran {len(mirror) - len(reference)} more steps than vLLM, "
                                f"starting at step {extra['step']}"}
    return {
        "steps_total": len(reference),
        "steps_identical": identical,
        "mirror_steps": len(mirror),
        "first_divergent_step": None if first is None else first["step"],
        "first_divergence": first,
        "fields_compared": list(COMPARED),
    }


def _describe(i: int, ref: dict[str, Any], mine: dict[str, Any] | None) -> dict[str, Any]:
    if mine is None:
        return {"index": i, "step": ref["step"], "field": "steps",
                "description": f"vLLM ran step {ref['step']} but the mirror had already finished"}
    if mine["step"] != ref["step"]:
        return {"index": i, "step": ref["step"], "field": "step",
                "description": f"step {i + 1} of the run is step {ref['step']} in vLLM but step {mine['step']} "
                               "in the mirror (idle steps skipped differently)"}
    a, b = _norm(ref), _norm(mine)
    for key in COMPARED:
        if a[key] != b[key]:
            return {"index": i, "step": ref["step"], "field": key, "vllm": a[key], "mirror": b[key],
                    "description": f"step {ref['step']}: {key} differs: vLLM {json.dumps(a[key])} "
                                   f"vs mirror {json.dumps(b[key])}"}
    raise AssertionError("unreachable")  # pragma: no cover


def scheduler_options(config: dict[str, Any]) -> dict[str, Any]:
    """The harness config as ``vllm-v1`` options (same knob names)."""
    return {k: config[k] for k in HARNESS_DEFAULTS}


def run_mirror(requests: list[Request], config: dict[str, Any], *, max_span: int | None = 1) -> list[dict[str, Any]]:
    """Replay through the registered ``vllm-v1`` plugin, one observed line per step."""
    from tickgate import BuildContext, Clock, get_registry, run_scheduler, validate

    info = get_registry().get("scheduler", "vllm-v1")
    options = scheduler_options(config)
    validate(options, info.obj.options_schema, file="<conformance config>")
    clock = Clock()
    ctx = BuildContext(clock=clock, timing=None, make_kv_allocator=None, make_admission=None)
    scheduler = info.obj.build(options, ctx)
    lines: list[dict[str, Any]] = []
    scheduler.observer = lines.append
    rejected: list[Any] = []

    class _Sink:
        def arrival(self, request: Request) -> None:
            pass

        def record(self, record: Any) -> None:
            pass

        def outcome(self, outcome: Any) -> None:
            if outcome.status != "completed":
                rejected.append(outcome)

    run_scheduler(requests, scheduler, clock, [_Sink()], timed=False, label='scheduler "vllm-v1"')
    if rejected:
        o = rejected[0]
        raise InputError("<workload>", f"request {o.id!r} cannot run in vLLM either: {o.reason}")
    return with_drain_steps(lines)


def with_drain_steps(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
            out.append({"step": step, "sched": [], "num_tokens": 0, "preempted": [], "finished": [],
                        "free_blocks_after_sched": free, "running_after_sched": 0, "free_blocks": free,
                        "running": 0, "waiting": 0})
    return out
