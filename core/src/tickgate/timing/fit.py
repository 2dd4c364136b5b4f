"""``tickgate timing fit``: the roofline's free factors fitted to measurements.

A timing file is YAML with the ``timing`` section a policy has (``name:
roofline``, ``options``) and, once fitted, ``fitted``: the factors found for
each engine family (measured points come from vLLM, SGLang and TensorRT-LLM,
whose overheads differ). ``timing check --timing FILE`` prices a point with its
family's fitted factors, else with the file's options, else the defaults.

The search is deterministic: coordinate descent in log space over
:data:`FIT_FACTORS`, each trial a full replay of the family's points, the
objective the mean absolute log error ``|ln(predicted / measured)|`` over every
predicted value (symmetric: 2x too fast costs what 2x too slow does), each
capped at ln 2 (:data:`LOSS_CAP`: a value the model cannot describe at all, a
point bound by its benchmark client, does not pull the others away). Each
round tries every factor x and / the step, keeps the best move, and the step
shrinks when a round finds none. Values are rounded to 4 significant digits
before they are tried, so the written file is the same bytes on every run.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ..util.errors import InputError
from .check import Prediction, check_points
from .points import Point, Skip, family
from .roofline import ENGINE_DEFAULTS, FACTORS, RooflineTiming

__all__ = [
    "FIT_FACTORS",
    "TimingFile",
    "fit_families",
    "fit_family",
    "load_timing_file",
    "objective",
    "write_timing_file",
]

#: the factors the fit adjusts (the rest keep their defaults)
FIT_FACTORS = (
    "compute_efficiency",
    "memory_efficiency",
    "step_overhead_ms",
    "layer_overhead_us",
    "per_seq_overhead_us",
    "allreduce_latency_us",
    "frontend_ms",
    "frontend_token_us",
)


#: the lowest efficiency the fit tries
EFFICIENCY_FLOOR = 0.25


@attrs.frozen
class TimingFile:
    """A timing file's roofline options and its per-family fitted factors."""

    options: Mapping[str, Any]
    fitted: Mapping[str, Mapping[str, float]] = attrs.field(factory=dict)
    #: the whole file (a policy's scheduler section replays benchmark runs)
    document: Mapping[str, Any] = attrs.field(factory=dict)

    def factors_for(self, engine_family: str) -> dict[str, float]:
        chosen = {k: float(v) for k, v in self.options.items() if k in FACTORS}
        chosen.update(self.fitted.get(engine_family, {}))
        return chosen


def load_timing_file(path: Path) -> TimingFile:
    """Read a timing file (a policy file works too); errors name the file, line and JSON path."""
    from ..util.locations import load_yaml
    from ..util.schemas import validate

    data, locs = load_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("timing"), dict):
        raise InputError(
            path, "expected a mapping with a 'timing' section (name: roofline, options: {...})", line=1
        )
    timing = data["timing"]
    if timing.get("name") != "roofline":
        line, col = locs.get("$.timing.name", (None, None))
        raise InputError(
            path,
            f"timing fit and check work on the roofline model, not {timing.get('name')!r}",
            line=line,
            column=col,
            json_path="$.timing.name",
        )
    schema = {**RooflineTiming.options_schema, "required": []}
    options = timing.get("options", {})
    validate(options, schema, file=path, locations=locs, prefix=("timing", "options"))
    fitted = data.get("fitted", {})
    factor_schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {k: RooflineTiming.options_schema["properties"][k] for k in FACTORS},
    }
    validate(
        fitted,
        {
            "type": "object",
            "additionalProperties": False,
            "properties": dict.fromkeys(ENGINE_DEFAULTS, factor_schema),
        },
        file=path,
        locations=locs,
        prefix=("fitted",),
    )
    return TimingFile(dict(options), {k: dict(v) for k, v in fitted.items()}, data)


def _round(value: float) -> float:
    """Four significant digits: what the fit tries and writes."""
    if value == 0:
        return 0.0
    return float(f"{value:.4g}")


#: no value's error counts for more than a factor of 2: a point the roofline cannot
#: describe (one bound by its benchmark client) must not drag every factor its way
LOSS_CAP = math.log(2.0)


def objective(results: list[Prediction]) -> float:
    """Mean of min(|ln(predicted / measured)|, ln 2) over every predicted value."""
    logs = [
        min(abs(math.log1p(e)), LOSS_CAP) if e > -1 else LOSS_CAP
        for r in results
        for e in r.errors().values()
    ]
    return sum(logs) / len(logs) if logs else 0.0


class _Scorer:
    """The objective of a family's points under given factors: re-timed from a
    recording of each point (:mod:`.retime`), replayed where a point has none."""

    def __init__(self, points: list[Point]) -> None:
        self.points = points
        self.recordings: dict[str, Any] = {}
        self.cache: dict[tuple[float, ...], float] = {}

    def record(self, factors: Mapping[str, float]) -> None:
        from .check import located, setup_policy
        from .retime import record

        self.cache.clear()
        for point in self.points:
            if point.direct:
                continue
            try:
                setup = point.setup(factors)
            except Skip:
                continue
            if setup.max_concurrency is not None:
                continue  # a closed loop's sends follow its finishes: replayed, not re-timed
            policy = setup_policy(setup)
            with located(setup, str(policy.path)):
                self.recordings[point.id] = record(policy, setup.requests)

    def __call__(self, factors: Mapping[str, float]) -> float:
        key = tuple(factors[k] for k in FIT_FACTORS)
        if key not in self.cache:
            self.cache[key] = objective(self.predictions(factors))
        return self.cache[key]

    def predictions(self, factors: Mapping[str, float]) -> list[Prediction]:
        from .check import figures

        results = []
        for point in self.points:
            recording = self.recordings.get(point.id)
            if recording is None:
                results.extend(check_points([point], lambda _: factors))
                continue
            model = RooflineTiming(point.options(factors))
            done, gaps = recording.retime(model)
            got = figures(done, gaps, frontend_ms=model.frontend_ms)
            results.append(Prediction(point, {k: got[k] for k in point.measured if k in got}))
        return results


def fit_family(
    points: list[Point],
    engine_family: str,
    start: Mapping[str, float],
    *,
    rounds: int = 40,
    passes: int = 3,
    step: float = 1.6,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, float], float, float]:
    """Fit the family's factors on its points from ``start`` (resolved factors):
    ``passes`` times, record the points under the current factors and run up to
    ``rounds`` rounds of coordinate descent on the recordings. Returns the
    fitted factors and the objective (on the recordings) before and after."""
    mine = [p for p in points if family(p) == engine_family]
    score = _Scorer(mine)
    current = {k: _round(float(v)) for k, v in start.items()}
    score.record(current)
    before = best = score(current)
    for n in range(passes):
        if n:
            score.record(current)
            best = score(current)
        trial_step = step
        for _ in range(rounds):
            moves = []
            for key in FIT_FACTORS:
                for scale in (trial_step, 1 / trial_step):
                    value = _round(current[key] * scale)
                    if key.endswith("efficiency"):
                        # a kernel reaches at most its peak, and never less than a
                        # quarter of it: below that a point is bound by something the
                        # roofline does not model (a benchmark client, a front end)
                        value = min(max(value, EFFICIENCY_FLOOR), 1.0)
                    if value == current[key]:
                        continue
                    trial = {**current, key: value}
                    moves.append((score(trial), FIT_FACTORS.index(key), scale < 1, trial))
            improving = [m for m in moves if m[0] < best]
            if improving:
                best, _, _, current = min(improving, key=lambda m: m[:3])
            elif trial_step < 1.01:
                break
            else:
                trial_step = math.sqrt(trial_step)
        if progress is not None:
            progress(f"{engine_family}: pass {n + 1}/{passes}: objective {best:.4f}")
    return {k: current[k] for k in FIT_FACTORS}, before, best


def _fit_one(args: tuple[list[Point], str, dict[str, float], int, int]) -> tuple[str, dict[str, float]]:
    points, fam, start, rounds, passes = args
    return fam, fit_family(points, fam, start, rounds=rounds, passes=passes)[0]


def fit_families(
    points: list[Any], start: TimingFile, *, rounds: int, passes: int, jobs: int = 1
) -> dict[str, dict[str, float]]:
    """Every engine family's fitted factors, the families in ``jobs`` processes (each
    family's fit is independent and deterministic, so the result does not depend on
    ``jobs``)."""
    from ..util.progress import wanted

    families = sorted({f for f in map(family, points) if f is not None})
    tasks = [
        (
            [p for p in points if family(p) == fam],
            fam,
            {**ENGINE_DEFAULTS[fam], **start.factors_for(fam)},
            rounds,
            passes,
        )
        for fam in families
    ]
    if jobs > 1 and len(tasks) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
            return dict(pool.map(_fit_one, tasks))
    show = (lambda text: print(text, file=sys.stderr)) if wanted() else None
    return {
        fam: fit_family(pts, fam, factors, rounds=rounds, passes=passes, progress=show)[0]
        for pts, fam, factors, rounds, passes in tasks
    }


def write_timing_file(
    path: Path, base: TimingFile, fitted: Mapping[str, Mapping[str, float]], comment: str
) -> None:
    """The base's timing section and the fitted factors, as YAML, keys sorted."""
    from ..util.atomic import atomic_writer

    def scalar(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return repr(value)
        import json

        return json.dumps(value)

    lines = [f"# {line}" for line in comment.splitlines()]
    lines += ["timing:", "  name: roofline", "  options:" + (" {}" if not base.options else "")]
    for key in sorted(base.options):
        value = base.options[key]
        if isinstance(value, Mapping):
            lines.append(f"    {key}:")
            lines += [f"      {k}: {scalar(v)}" for k, v in sorted(value.items())]
        else:
            lines.append(f"    {key}: {scalar(value)}")
    lines.append("fitted:")
    for fam in sorted(fitted):
        lines.append(f"  {fam}:")
        lines += [f"    {k}: {scalar(v)}" for k, v in sorted(fitted[fam].items())]
    with atomic_writer(path) as fh:
        fh.write("\n".join(lines) + "\n")
