"""``tickgate timing check RUN --deployment D.yaml``: one benchmark client's run, request by request.

The run is imported as ``tickgate import`` does (:mod:`tickgate.client_runs`: what the client sent,
failed requests skipped), replayed under the deployment's policy with every outcome kept, and joined
by request id with what the client measured, read by the gate's mirror of the format (the same
observations the gate compares). A request the replay and the run disagree about is flagged rather
than dropped silently (docs/timing.md, "Checking against your own run").

Per request, both sides: TTFT, ITL (the request's mean inter-token gap; predicted: its decode time
over its output tokens less one, which is also its TPOT), TPOT ``(e2e - ttft) / (output - 1)`` and
E2E. The summary's figures are over the joined requests' values (ITL too: per request, not pooled
gaps, so both sides weigh every request once).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from statistics import median
from typing import Any

from ..util.errors import InputError
from ..util.quantile import quantile
from .points import Origin, PointSetup

__all__ = ["METRICS", "check_run", "join", "load_run", "render"]

METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
STATS = (("mean", None), ("p50", 0.5), ("p95", 0.95), ("p99", 0.99))


def _round(value: float) -> float:
    """Nine significant figures: the clients write microseconds (six decimals of a millisecond)."""
    return float(f"{value:.9g}")


def run_format(path: Path, fmt: str) -> str:
    """The client format of ``path``: ``fmt``, or (``auto``) the gate's detection of it, which must
    be a format ``tickgate import`` reads as a client run."""
    from ..gate.detect import detect_format
    from ..host.registry import get_registry

    name = detect_format(path).name if fmt == "auto" else fmt
    readers = clients()
    if name not in readers:
        raise InputError(
            path,
            f"a {name} file is not a benchmark client's run tickgate imports; "
            f"expected one of {', '.join(readers)}",
        )
    get_registry().get("backend_mirror", name)  # the measured side: its mirror must be installed
    return name


def clients() -> list[str]:
    """The installed workload readers that read a benchmark client's run."""
    from ..client_runs.reader import ClientRunReader
    from ..host.registry import get_registry

    registry = get_registry()
    return [
        n
        for n in registry.names("workload_reader")
        if isinstance(registry.get("workload_reader", n).obj, type)
        and issubclass(registry.get("workload_reader", n).obj, ClientRunReader)
    ]


def deployment_policy(deployment: Path, timing: Path | None) -> tuple[dict[str, Any], Origin]:
    """The deployment's policy document, its timing options replaced by ``timing``'s when given:
    a roofline file's factors as ``timing check`` takes them for points
    (:func:`tickgate.timing.fit.load_timing_file`), else the file's timing options, which must be
    for the deployment's timing model and are validated against its schema, located in that file."""
    from ..util.locations import load_yaml

    data, locs = load_yaml(deployment)
    if not isinstance(data, dict):
        raise InputError(deployment, "a deployment is a policy file: a mapping with 'version: 1'", line=1)
    for section in ("scheduler", "timing"):
        if not isinstance(data.get(section), dict):
            line = locs.get(f"$.{section}", (1, None))[0]
            raise InputError(
                deployment,
                f"a deployment names the server's {section} (a '{section}' section with a name)",
                line=line,
                json_path=f"$.{section}",
            )
    policy = {k: v for k, v in data.items() if k not in ("gate", "fitted")}
    if timing is not None:
        policy["timing"] = _replaced_timing(data, deployment, locs, timing)
    return policy, Origin(deployment, f"deployment {deployment}", paths={"$": "$"})


def _replaced_timing(data: Mapping[str, Any], deployment: Path, locs: Any, timing: Path) -> dict[str, Any]:
    from ..host.registry import get_registry
    from ..util.locations import load_yaml
    from ..util.schemas import validate
    from .fit import load_timing_file
    from .measurements import _base_family

    name = data["timing"].get("name")
    fitted, fitted_locs = load_yaml(timing)
    section = fitted.get("timing") if isinstance(fitted, dict) else None
    if not isinstance(section, dict):
        raise InputError(timing, "expected a mapping with a 'timing' section (name, options)", line=1)
    if section.get("name") != name:
        line, column = fitted_locs.get("$.timing.name", (None, None))
        raise InputError(
            timing,
            f"the deployment {deployment} is timed by {name!r}; this file's timing is {section.get('name')!r}",
            line=line,
            column=column,
            json_path="$.timing.name",
        )
    options = dict(data["timing"].get("options") or {})
    if name == "roofline":
        options.update(load_timing_file(timing).factors_for(_base_family(data)))
    else:
        model = get_registry().get("timing_model", str(name)).obj
        given = section.get("options") or {}
        schema = {**getattr(model, "options_schema", {}), "required": []}
        validate(given, schema, file=timing, locations=fitted_locs, prefix=("timing", "options"))
        options = dict(given)
    return {"name": name, "options": options}


def _measured(obs: Mapping[str, Any]) -> dict[str, float | None]:
    ttft, e2e, out = obs.get("ttft_ms"), obs.get("latency_ms"), obs.get("tokens_out")
    gaps = obs.get("itl_ms") or []
    if out is None:
        out = len(gaps) + 1
    return {
        "ttft_ms": ttft,
        "itl_ms": sum(gaps) / len(gaps) if gaps else None,
        "tpot_ms": (e2e - ttft) / (out - 1) if out > 1 and ttft is not None and e2e is not None else None,
        "e2e_ms": e2e,
    }


def _predicted(o: Mapping[str, Any], frontend_ms: float) -> dict[str, float | None]:
    arrival, first, end, out = o["arrival_ms"], o["first_token_ms"], o["finished_ms"], o["output_tokens"]
    per_token = (end - first) / (out - 1) if out > 1 else None
    return {
        "ttft_ms": first + frontend_ms - arrival,
        "itl_ms": per_token,
        "tpot_ms": per_token,
        "e2e_ms": end + frontend_ms - arrival,
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric in METRICS:
        pairs = [
            (r["measured"][metric], r["predicted"][metric])
            for r in rows
            if r["measured"][metric] is not None and r["predicted"][metric] is not None
        ]
        if not pairs:
            continue
        block: dict[str, Any] = {"requests": len(pairs)}
        for side, values in (("measured", [m for m, _ in pairs]), ("predicted", [p for _, p in pairs])):
            data = sorted(values)
            block[side] = {
                stat: _round(sum(data) / len(data) if q is None else quantile(data, q)) for stat, q in STATS
            }
        errors = [(p - m) / m for m, p in pairs if m]
        if errors:
            block["mdape"] = _round(median(abs(e) for e in errors))
            block["bias"] = _round(sum(errors) / len(errors))
        out[metric] = block
    return out


def load_run(run: Path, fmt: str) -> tuple[str, Any, list[Any], int | None, list[Mapping[str, Any]]]:
    """``run`` read once for replays: its client format, reader, imported requests, the client's
    concurrency (None: open loop) and what the client measured per request."""
    from ..host.registry import get_registry

    if not run.exists():
        raise InputError(run, "file not found")
    name = run_format(run, fmt)
    reader = get_registry().get("workload_reader", name).obj()
    requests = list(reader.read(run, {}))
    return name, reader, requests, reader.max_concurrency, reader.observations(run)["requests"]


def join(
    loaded: tuple[str, Any, list[Any], int | None, list[Mapping[str, Any]]],
    policy: Mapping[str, Any],
    origin: Origin,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A loaded run (:func:`load_run`) replayed under ``policy``: per joined request its measured
    and predicted figures (unrounded, sorted by id), and the flags, sorted."""
    from .check import replay_setup, setup_policy

    _, reader, requests, concurrency, observed = loaded
    setup = PointSetup(dict(policy), requests, origin=origin, max_concurrency=concurrency)
    report = replay_setup(setup, setup_policy(setup))
    frontend = ((report.get("inputs") or {}).get("timing") or {}).get("options", {}).get("frontend_ms", 0.0)
    outcomes = {o["id"]: o for o in report.get("outcomes", ())}
    prefix = f"{reader.id_prefix}-"
    rows: list[dict[str, Any]] = []
    flags: list[dict[str, Any]] = []
    records_cache = any(o.get("cached_tokens") for o in observed)
    for obs in observed:
        rid = str(obs["request_id"])
        if obs.get("error"):
            flags.append(
                {"id": rid, "kind": "failed", "detail": f"the client recorded an error: {obs['error']}"}
            )
            continue
        outcome = outcomes.get(prefix + rid)
        if outcome is None:
            continue  # skipped by the import for another reason (zero tokens): in its source
        if outcome.get("status") != "completed":
            flags.append(
                {"id": rid, "kind": "not-completed", "detail": f"the replay: {outcome.get('reason')}"}
            )
            continue
        measured_out = obs.get("tokens_out")
        if measured_out is None:
            measured_out = len(obs.get("itl_ms") or ()) + 1
        if outcome["output_tokens"] != measured_out:
            flags.append(
                {
                    "id": rid,
                    "kind": "output-length",
                    "detail": f"the run generated {measured_out} tokens, the replay {outcome['output_tokens']}",
                }
            )
        hits = outcome.get("prefix_hit_tokens", 0)
        if hits and not records_cache:
            flags.append(
                {
                    "id": rid,
                    "kind": "prefix-cache",
                    "detail": f"the replay hit {hits} cached prompt tokens; the run records no cache hits",
                }
            )
        elif records_cache and obs.get("cached_tokens") and not hits:
            flags.append(
                {
                    "id": rid,
                    "kind": "prefix-cache",
                    "detail": f"the run hit {obs['cached_tokens']} cached prompt tokens; the replay none",
                }
            )
        rows.append(
            {
                "id": rid,
                "measured": _measured(obs),
                "predicted": _predicted(outcome, frontend),
            }
        )
    rows.sort(key=lambda r: r["id"])
    flags.sort(key=lambda f: (f["id"], f["kind"]))
    return rows, flags


def check_run(run: Path, fmt: str, deployment: Path, timing: Path | None) -> dict[str, Any]:
    """CHECK.json's document: ``run`` (of client format ``fmt``, or ``auto``) replayed under the
    deployment and compared request by request."""
    loaded = load_run(run, fmt)
    name, _, requests, concurrency, observed = loaded
    policy, origin = deployment_policy(deployment, timing)
    rows, flags = join(loaded, policy, origin)
    summary = _summary(rows)  # from the values as read and replayed; rounded only for the file
    rows = [{**r, "measured": _rounded(r["measured"]), "predicted": _rounded(r["predicted"])} for r in rows]
    return {
        "run": str(run),
        "format": name,
        "deployment": str(deployment),
        "timing": str(timing) if timing is not None else None,
        "max_concurrency": concurrency,
        "requests": {"in_run": len(observed), "imported": len(requests), "joined": len(rows)},
        "per_request": rows,
        "summary": summary,
        "flags": flags,
    }


def _rounded(values: Mapping[str, float | None]) -> dict[str, float | None]:
    return {k: None if v is None else _round(v) for k, v in values.items()}


def render(doc: Mapping[str, Any]) -> str:
    """CHECK.json's bytes: sorted keys, so the same run and deployment give the same file."""
    return json.dumps(doc, sort_keys=True, indent=1) + "\n"
