"""Step-by-step conformance of a scheduler mirror with a recorded run of the real
engine's scheduler: what ``tickgate conformance vllm`` and ``tickgate conformance
sglang`` share.

Both reference harnesses (``../shared/tools/vllm-reference``,
``../shared/tools/sglang-reference``) read the same workload format -- ``{"config":
{...}, "requests": [{"id", "arrival_step", "prompt_len" | "prompt_token_ids",
"max_output_len", "priority"}]}`` -- and write one JSON line per engine step. An
engine adapter supplies its harness's config keys and defaults, the per-step fields
it compares (each line normalised to those) and a replay of the mirror that yields
lines in the same shape; everything else (reading and checking the inputs, aligning
the steps, naming the first divergence, the command line and its report) is here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ..interfaces.model import Request
from ..util.errors import InputError
from ..util.locations import load_json, parse_json


@dataclass(frozen=True)
class ConformanceSpec:
    """One engine's conformance check.

    ``defaults`` are the harness's config keys and defaults (``DEFAULT_CONFIG`` of
    its driver): any other key is refused. ``check_config(raw, path, prefix)``
    validates one config source where it is written. ``fields`` are the compared
    per-step fields in the order a divergence is reported; ``norm`` turns a line
    (reference or mirror) into exactly those fields. ``run_mirror(requests,
    config)`` replays the workload through the mirror, one line per executed step.
    """

    engine: str
    label: str
    defaults: Mapping[str, Any]
    fields: tuple[str, ...]
    norm: Callable[[dict[str, Any]], dict[str, Any]]
    run_mirror: Callable[[list[Request], dict[str, Any]], list[dict[str, Any]]]
    check_config: Callable[[dict[str, Any], Path, tuple[str, ...]], None] | None = None
    #: fields a reference line must carry (default: ``fields``)
    required: tuple[str, ...] | None = None
    #: a mirror with fast paths: ``(requests, config, slow_path)`` -> its lines and what
    #: the report says of the paths; when set, the command takes ``--slow-path``
    run_mirror_paths: (
        Callable[[list[Request], dict[str, Any], bool], tuple[list[dict[str, Any]], dict[str, Any]]] | None
    ) = None


def load_reference_workload(
    path: Path, config_path: Path | None, spec: ConformanceSpec
) -> tuple[list[Request], dict[str, Any]]:
    """Requests in the harness's arrival order (arrival_step, then file order) and
    the config: the harness defaults, the workload's ``config``, then ``--config``."""
    data = load_json(path)
    if isinstance(data, list):
        data = {"requests": data}
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list):
        raise InputError(
            path, 'expected a list of requests or {"config": {...}, "requests": [...]}', json_path="$"
        )
    config = dict(spec.defaults)
    config.update(_config(data.get("config", {}), path, ("config",), spec))
    if config_path is not None:
        config.update(_config(load_json(config_path), config_path, (), spec))
    items = []
    ids: set[str] = set()
    for i, item in enumerate(data["requests"]):
        request = _request(item, path, i)
        if request.id in ids:
            raise InputError(path, f"duplicate request id {request.id!r}", json_path=f"$.requests[{i}].id")
        ids.add(request.id)
        items.append((request.arrival_tick, i, request))
    items.sort(key=lambda t: (t[0], t[1]))
    return [r for _, _, r in items], config


def _config(raw: Any, path: Path, prefix: tuple[str, ...], spec: ConformanceSpec) -> dict[str, Any]:
    where = "$" + "".join(f".{p}" for p in prefix)
    if not isinstance(raw, dict):
        raise InputError(path, "the config must be a JSON object", json_path=where)
    unknown = sorted(set(raw) - set(spec.defaults))
    if unknown:
        raise InputError(
            path, f"unknown config keys {unknown}; expected some of {sorted(spec.defaults)}", json_path=where
        )
    if spec.check_config is not None:
        spec.check_config(raw, path, prefix)
    return dict(raw)


def _int(item: Any, key: str, path: Path, i: int, default: int | None = None) -> int:
    if not isinstance(item, dict):
        raise InputError(path, "expected a request object", json_path=f"$.requests[{i}]")
    value = item.get(key, default)
    if type(value) is not int or value < 0:
        found = "it is missing" if key not in item else f"found {value!r}"
        raise InputError(
            path, f"expected a non-negative integer, {found}", json_path=f"$.requests[{i}].{key}"
        )
    return value


def _request(item: Any, path: Path, i: int) -> Request:
    where = f"$.requests[{i}]"
    rid = item.get("id") if isinstance(item, dict) else None
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        raise InputError(path, "expected an id (string)", json_path=f"{where}.id")
    ids = item.get("prompt_token_ids")
    if ids is not None:
        if not isinstance(ids, list) or not ids or not all(type(t) is int and t >= 0 for t in ids):
            raise InputError(
                path, "expected a non-empty list of token ids", json_path=f"{where}.prompt_token_ids"
            )
        prompt = len(ids)
    else:
        prompt = _int(item, "prompt_len", path, i)
    out = _int(item, "max_output_len", path, i)
    prio = item.get("priority", 0)
    if type(prio) is not int:
        raise InputError(path, f"expected an integer, found {prio!r}", json_path=f"{where}.priority")
    if prompt < 1 or out < 1:
        raise InputError(path, "prompt and max_output_len must be at least 1", json_path=where)
    return Request(
        id=str(rid),
        prompt_tokens=prompt,
        max_output_tokens=out,
        priority=prio,
        arrival_tick=_int(item, "arrival_step", path, i, 0),
        prompt_token_ids=tuple(ids) if ids is not None else None,
    )


def read_steps(path: Path, spec: ConformanceSpec) -> Iterator[dict[str, Any]]:
    """The reference steps, validated line by line (a bad line is located)."""
    required = spec.required if spec.required is not None else spec.fields
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
            missing = [k for k in required if k not in line]
            if missing:
                raise InputError(path, f"step line lacks {missing}", line=lineno)
            try:
                spec.norm(line)
            except (TypeError, KeyError, IndexError, ValueError, AttributeError):
                raise InputError(
                    path,
                    f"a field of this step has the wrong shape for the {spec.label} harness's format",
                    line=lineno,
                ) from None
            yield line


def observe_mirror(
    scheduler: str,
    options: dict[str, Any],
    requests: list[Request],
    engine_label: str,
    built: Callable[[Any], None] | None = None,
) -> list[dict[str, Any]]:
    """Replay ``requests`` (untimed) through the registered scheduler plugin ``scheduler``
    built with ``options`` (validated by its schema), collecting what its ``observer``
    hook logs, one line per step; a request the mirror rejects is an error (the real
    engine would not run it either: ``engine_label`` names it). ``built`` is handed
    the mirror before the replay (to read its own counts after it)."""
    from ..host.registry import get_registry
    from ..interfaces import BuildContext, Clock
    from ..replay.engine import run
    from ..util.schemas import validate

    info = get_registry().get("scheduler", scheduler)
    validate(options, info.obj.options_schema, file="<conformance config>")
    clock = Clock()
    ctx = BuildContext(clock=clock, timing=None, make_kv_allocator=None, make_admission=None)
    mirror = info.obj.build(options, ctx)
    lines: list[dict[str, Any]] = []
    mirror.observer = lines.append
    if built is not None:
        built(mirror)
    rejected: list[Any] = []

    class _Rejections:
        def arrival(self, request: Request) -> None:
            pass

        def record(self, record: Any) -> None:
            pass

        def outcome(self, outcome: Any) -> None:
            if outcome.status != "completed":
                rejected.append(outcome)

    run(requests, mirror, clock, [_Rejections()], timed=False, label=f'scheduler "{scheduler}"')
    if rejected:
        o = rejected[0]
        # no file here: check() names the workload the requests came from
        raise InputError(None, f"request {o.id!r} cannot run in {engine_label} either: {o.reason}")
    return lines


def compare(
    reference: Sequence[dict[str, Any]], mirror: Sequence[dict[str, Any]], spec: ConformanceSpec
) -> dict[str, Any]:
    """Compare the runs step by step (aligned by position, steps checked); the
    first divergence is described in words with its step and field."""
    identical = 0
    first: dict[str, Any] | None = None
    for i, ref in enumerate(reference):
        mine = mirror[i] if i < len(mirror) else None
        if mine is not None and mine["step"] == ref["step"] and spec.norm(mine) == spec.norm(ref):
            identical += 1
            continue
        if first is None:
            first = _describe(i, ref, mine, spec)
    if first is None and len(mirror) > len(reference):
        extra = mirror[len(reference)]
        first = {
            "index": len(reference),
            "step": extra["step"],
            "field": "steps",
            "description": f"the mirror ran {len(mirror) - len(reference)} more steps than "
            f"{spec.label}, starting at step {extra['step']}",
        }
    return {
        "steps_total": len(reference),
        "steps_identical": identical,
        "mirror_steps": len(mirror),
        "first_divergent_step": None if first is None else first["step"],
        "first_divergence": first,
        "fields_compared": list(spec.fields),
    }


def _describe(
    i: int, ref: dict[str, Any], mine: dict[str, Any] | None, spec: ConformanceSpec
) -> dict[str, Any]:
    name = spec.label
    if mine is None:
        return {
            "index": i,
            "step": ref["step"],
            "field": "steps",
            "description": f"{name} ran step {ref['step']} but the mirror had already finished",
        }
    if mine["step"] != ref["step"]:
        return {
            "index": i,
            "step": ref["step"],
            "field": "step",
            "description": f"step {i + 1} of the run is step {ref['step']} in {name} but step "
            f"{mine['step']} in the mirror (idle steps skipped differently)",
        }
    a, b = spec.norm(ref), spec.norm(mine)
    for key in spec.fields:
        if a[key] != b[key]:
            return {
                "index": i,
                "step": ref["step"],
                "field": key,
                spec.engine: a[key],
                "mirror": b[key],
                "description": f"step {ref['step']}: {key} differs: {name} {json.dumps(a[key])} "
                f"vs mirror {json.dumps(b[key])}",
            }
    raise AssertionError("unreachable")  # pragma: no cover


def check(
    workload_path: Path,
    reference_path: Path,
    config_path: Path | None,
    spec: ConformanceSpec,
    slow_path: bool = False,
) -> dict[str, Any]:
    """The whole check: load, replay, compare; the report (JSON-ready). ``slow_path``:
    the mirror's full step for every step (``spec.run_mirror_paths`` only)."""
    requests, config = load_reference_workload(workload_path, config_path, spec)
    reference = list(read_steps(reference_path, spec))
    paths: dict[str, Any] = {}
    try:
        if spec.run_mirror_paths is not None:
            lines, paths = spec.run_mirror_paths(requests, config, slow_path)
        else:
            lines = spec.run_mirror(requests, config)
    except InputError as exc:  # about the requests (observe_mirror): the workload's file
        if exc.path is not None:
            raise
        raise InputError(
            workload_path, exc.message, line=exc.line, column=exc.column, json_path=exc.json_path
        ) from None
    report = compare(reference, lines, spec)
    return {
        **report,
        **paths,
        "workload": str(workload_path),
        "reference": str(reference_path),
        "config": config,
        "requests": len(requests),
    }


def conformance_command(spec: ConformanceSpec, *, harness: str, driver: str) -> click.Command:
    """The ``tickgate conformance ENGINE`` command for ``spec``: writes the report
    atomically, exits 0 only when every step matches (1 on a divergence, 2 on bad
    input)."""

    @click.command(spec.engine)
    @click.option(
        "--workload",
        "workload_path",
        required=True,
        type=click.Path(path_type=Path),
        help=f"Workload in the {harness} format (prompt_len, max_output_len, arrival_step).",
    )
    @click.option(
        "--reference",
        "reference_path",
        required=True,
        type=click.Path(path_type=Path),
        help=f"Per-step JSONL written by {driver} for this workload and config.",
    )
    @click.option(
        "--output",
        "output_path",
        required=True,
        type=click.Path(path_type=Path),
        help="Where to write the conformance report (JSON, atomically).",
    )
    @click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path),
        default=None,
        help=f"Config JSON overriding the workload's embedded config (as {driver} --config).",
    )
    def command(
        workload_path: Path,
        reference_path: Path,
        output_path: Path,
        config_path: Path | None,
        slow_path: bool = False,
    ) -> None:
        from ..commands.cli import exit_with
        from ..util.atomic import write_json

        report = check(workload_path, reference_path, config_path, spec, slow_path)
        write_json(output_path, report)
        verdict = "identical" if report["first_divergence"] is None else "DIVERGES"
        if "mirror_path" in report:
            verdict += f", {report['mirror_path']} path"
        click.echo(
            f"{spec.engine} conformance: {report['steps_identical']}/{report['steps_total']} steps "
            f"identical ({verdict}) -> {output_path}"
        )
        if report["first_divergence"] is not None:
            click.echo(report["first_divergence"]["description"], err=True)
            exit_with(1)

    if spec.run_mirror_paths is not None:
        command = click.option(
            "--slow-path",
            "slow_path",
            is_flag=True,
            default=False,
            help="Run the mirror's full step at every step (its fast paths off) instead of its fast "
            "paths, whose steps are expanded one line each; both must match.",
        )(command)
    command.help = (
        f"Replay WORKLOAD with tickgate's {spec.label} mirror and compare every step with "
        f"REFERENCE, a recorded run of the real {spec.label} scheduler. Exit 0 only when every "
        "step matches, 1 at the first difference."
    )
    return command
