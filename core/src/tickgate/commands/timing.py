"""``tickgate timing check`` and ``tickgate timing fit``: timing models against measurements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import click

from ..util.words import plural

_PATH = click.Path(path_type=Path, dir_okay=False)


@click.group("timing")
def timing_command() -> None:
    """Check and calibrate timing models against published measurements (docs/timing.md)."""


def _table(results: list[Any]) -> list[str]:
    """Per point and value: measured, predicted and the error; skipped points with why."""
    lines = []
    for r in results:
        if r.predicted is None:
            lines.append(f"skipped  {r.point.id}: {r.skipped}")
            continue
        errors = r.errors()
        if r.assumed:
            lines.append(f"{r.point.id}  assumed: {'; '.join(r.assumed)}")
        for key in r.point.measured:
            if key in r.predicted and key in errors:
                lines.append(
                    f"{r.point.id}  {key:22s} measured {r.point.measured[key]:>12.4g}  "
                    f"predicted {r.predicted[key]:>12.4g}  error {errors[key] * 100:+7.1f} %"
                )
    return lines


def _summary_line(label: str, results: list[Any]) -> str:
    from ..timing.check import error_summary

    s = error_summary(results)
    if not s["values"]:
        return f"{label}: no predicted values"
    skipped = sum(1 for r in results if r.predicted is None)
    return (
        f"{label}: {plural(int(s['values']), 'value')} from {plural(len(results) - skipped, 'point')} ({skipped} skipped): "
        f"median |error| {s['median_ape'] * 100:.1f} %, {s['within_1_5x'] * 100:.0f} % within 1.5x"
    )


def _round(value: float) -> float:
    return float(f"{value:.6g}")


@timing_command.command("check")
@click.argument("points", metavar="POINTS|RUN", type=_PATH)
@click.option(
    "--timing", "timing_file", type=_PATH, help="A timing file (from timing fit) whose factors to use."
)
@click.option(
    "--output",
    "-o",
    type=_PATH,
    required=True,
    help="Predictions, one JSON line per point; with --deployment, CHECK.json.",
)
@click.option(
    "--deployment",
    type=_PATH,
    help="RUN is a benchmark client's run: the policy file of the deployment it ran against.",
)
@click.option(
    "--format",
    "points_format",
    default=None,
    help="POINTS: points (default) or aiconfigurator-silicon. RUN (--deployment): auto (default), "
    "vllm-bench, sglang-bench, aiperf, genai-perf or a plugin's client format.",
)
@click.option(
    "--models",
    type=click.Path(path_type=Path, file_okay=False),
    help="aiconfigurator-silicon: the directory of model configs (ORG--NAME_config.json).",
)
def check_command(
    points: Path,
    timing_file: Path | None,
    output: Path,
    deployment: Path | None,
    points_format: str | None,
    models: Path | None,
) -> None:
    """Replay every point of POINTS and compare what it predicts with what was measured.

    POINTS is realdata/measured/points.jsonl's format, or with --format
    aiconfigurator-silicon a CSV of measured deployments (closed-loop TTFT and TPOT; one
    line per row, predicted or skipped with why, and a table by engine, GPU, model and mode).

    With --deployment D.yaml, RUN is a benchmark client's run: imported as `tickgate import`
    does, replayed under D (its timing options replaced by --timing's), and written as
    CHECK.json: measured and predicted TTFT, ITL, TPOT and E2E per request and in summary,
    and flags where the run and the replay disagree (docs/timing.md)."""
    if deployment is not None:
        _check_run(points, deployment, timing_file, output, points_format or "auto", models)
        return
    points_format = points_format or "points"
    if points_format not in ("points", "aiconfigurator-silicon"):
        raise click.UsageError(
            f"--format {points_format}: POINTS is 'points' or 'aiconfigurator-silicon' "
            "(a benchmark client's run needs --deployment)"
        )
    from ..timing.check import check_points
    from ..timing.fit import load_timing_file
    from ..util.atomic import atomic_writer, check_distinct_outputs

    check_distinct_outputs({"--output": output}, {"POINTS": points, "--timing": timing_file})
    loaded = _measurements(points, points_format, models, read=_read_points)
    timing = load_timing_file(timing_file) if timing_file is not None else None
    results = check_points(loaded, timing.factors_for if timing is not None else None)
    # everything computed before the output is touched: a failure leaves it as it was
    silicon = points_format == "aiconfigurator-silicon"
    text = "".join(_line(r, skipped=silicon) for r in results if silicon or r.predicted is not None)
    if silicon:
        from ..timing.partitions import partition_table

        table = [*partition_table(results), _summary_line("total", results)]
    else:
        table = [*_table(results), _summary_line("total", results)]
    with atomic_writer(output) as fh:
        fh.write(text)
    click.echo("\n".join(table))


def _check_run(
    run: Path, deployment: Path, timing: Path | None, output: Path, fmt: str, models: Path | None
) -> None:
    """``timing check RUN --deployment D.yaml``: :mod:`tickgate.timing.run_check`."""
    from ..timing.run_check import check_run, render
    from ..util.atomic import atomic_writer, check_distinct_outputs

    if models is not None:
        raise click.UsageError("--models is for --format aiconfigurator-silicon")
    if fmt in ("points", "aiconfigurator-silicon"):
        raise click.UsageError(f"--format {fmt} is for POINTS, not a run checked with --deployment")
    check_distinct_outputs({"--output": output}, {"RUN": run, "--deployment": deployment, "--timing": timing})
    doc = check_run(run, fmt, deployment, timing)
    text = render(doc)  # everything computed before the output is touched
    with atomic_writer(output) as fh:
        fh.write(text)
    lines = [
        f"{doc['requests']['joined']} of {doc['requests']['in_run']} requests of {run} ({doc['format']}) "
        f"replayed under {deployment}"
    ]
    for metric, block in doc["summary"].items():
        m, p = block["measured"], block["predicted"]
        lines.append(
            f"{metric:8s} measured p50 {m['p50']:>10.4g}  predicted p50 {p['p50']:>10.4g}  "
            f"MdAPE {block.get('mdape', 0) * 100:5.1f} %  bias {block.get('bias', 0) * 100:+6.1f} %"
        )
    if doc["flags"]:
        kinds: dict[str, int] = {}
        for flag in doc["flags"]:
            kinds[flag["kind"]] = kinds.get(flag["kind"], 0) + 1
        lines.append("flags: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    click.echo("\n".join(lines))


def _line(result: Any, *, skipped: bool) -> str:
    """A prediction's output line: its figures, or (``skipped``) why there are none."""
    if result.predicted is None:
        body: dict[str, Any] = {"id": result.point.id, "skipped": result.skipped}
    else:
        body = {"id": result.point.id, "predicted": {k: _round(v) for k, v in result.predicted.items()}}
    return json.dumps(body, sort_keys=True) + "\n"


@timing_command.command("fit")
@click.argument("measurements", nargs=-1, required=True, type=_PATH)
@click.option(
    "--base", type=_PATH, help="The timing file (or policy) whose factors to start from (roofline)."
)
@click.option(
    "--deployment",
    type=_PATH,
    help="MEASUREMENTS are benchmark client runs of this deployment (a policy timed by 'linear'): "
    "fit its factors to them.",
)
@click.option(
    "--holdout",
    type=_PATH,
    multiple=True,
    help="With --deployment: a run of the same deployment not fitted on, whose error is reported (repeatable).",
)
@click.option("--output", "-o", type=_PATH, required=True, help="The fitted timing file.")
@click.option(
    "--rounds",
    type=click.IntRange(1, 1000),
    default=40,
    show_default=True,
    help="Coordinate-descent rounds per pass and engine family.",
)
@click.option(
    "--passes",
    type=click.IntRange(1, 20),
    default=3,
    show_default=True,
    help="Times the points are replayed again under the factors found so far.",
)
@click.option(
    "--format",
    "points_format",
    type=click.Choice(["auto", "aiconfigurator-silicon"]),
    default="auto",
    show_default=True,
    help="MEASUREMENTS as `timing check` reads them (auto: by content), or aiconfigurator's silicon CSV.",
)
@click.option(
    "--models",
    type=click.Path(path_type=Path, file_okay=False),
    help="aiconfigurator-silicon: the directory of model configs (ORG--NAME_config.json).",
)
@click.option(
    "--every",
    type=click.IntRange(1, 1000),
    default=1,
    show_default=True,
    help="Fit on every Nth measurement of each file (1st, N+1th, ...); the others are held out "
    "and their error reported apart.",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Engine families fitted in parallel processes (the result does not depend on it).",
)
def fit_command(
    measurements: tuple[Path, ...],
    base: Path | None,
    deployment: Path | None,
    holdout: tuple[Path, ...],
    output: Path,
    rounds: int,
    passes: int,
    points_format: str,
    models: Path | None,
    every: int,
    jobs: int,
) -> None:
    """Fit the roofline's free factors, per engine family, to MEASUREMENTS: measured
    points (realdata/measured/points.jsonl's format), benchmark client runs (any file
    `tickgate normalize` reads; replayed with the base policy's scheduler),
    TensorRT-LLM iteration statistics, or (--format aiconfigurator-silicon) measured
    deployments. Prints the error before and after, on the fitted measurements and on
    the held-out ones.

    With --deployment D.yaml, MEASUREMENTS are benchmark client runs of that deployment
    (as `timing check RUN --deployment` reads them) and the fit is of its `linear` timing's
    factors: per-request TTFT and ITL, in-sample and on --holdout runs, the factors'
    bootstrap ranges as comments; FITTED.yaml is what `timing check --timing` reads
    (docs/timing.md, "Fitting to your own runs")."""
    from ..timing.check import check_points, prepare
    from ..timing.fit import fit_families, load_timing_file, write_timing_file
    from ..util.atomic import check_distinct_outputs

    if deployment is not None:
        given = {
            "--base": base is not None,
            "--format": points_format != "auto",
            "--models": models is not None,
        }
        given.update(
            {"--every": every != 1, "--rounds": rounds != 40, "--passes": passes != 3, "--jobs": jobs != 1}
        )
        extra = [name for name, on in given.items() if on]
        if extra:
            raise click.UsageError(f"{', '.join(extra)}: for fitting a roofline, not with --deployment")
        _fit_runs(measurements, deployment, holdout, output)
        return
    if base is None:
        raise click.UsageError("timing fit needs --base (measured points) or --deployment (client runs)")
    if holdout:
        raise click.UsageError("--holdout is for runs fitted with --deployment (points: --every)")
    inputs: dict[str, Path | None] = {f"MEASUREMENTS ({path})": path for path in measurements}
    check_distinct_outputs({"--output": output}, {**inputs, "--base": base})
    start = load_timing_file(base)
    chosen: list[Any] = []
    held: list[Any] = []
    for path in measurements:
        from ..timing.measurements import read_measurements

        loaded = _measurements(
            path, points_format, models, read=lambda p: read_measurements(p, start.document, base)
        )
        chosen += loaded[::every]
        held += [p for i, p in enumerate(loaded) if i % every]
    prepare(chosen, start.factors_for)  # every measurement set up before hours of fitting
    fitted = fit_families(chosen, start, rounds=rounds, passes=passes, jobs=jobs)
    after_file = attrs.evolve(start, fitted=fitted)
    lines = []
    for label, group in (("fitted on, " if held else "", chosen), ("held out, ", held)):
        if group:
            lines.append(_summary_line(f"{label}before", check_points(group, start.factors_for)))
            lines.append(_summary_line(f"{label}after", check_points(group, after_file.factors_for)))
    names = ", ".join(p.name for p in measurements)
    options = f" --rounds {rounds} --passes {passes}"
    if points_format != "auto":
        options += f" --format {points_format} --models {models.name if models else ''}"
    if every > 1:
        options += f" --every {every}"
    write_timing_file(
        output, start, fitted, f"tickgate timing fit {names} --base {base.name}{options}\n" + "\n".join(lines)
    )
    click.echo("\n".join(lines))


def _fit_runs(runs: tuple[Path, ...], deployment: Path, holdout: tuple[Path, ...], output: Path) -> None:
    """``timing fit RUN... --deployment D.yaml``: :mod:`tickgate.timing.run_fit`."""
    from ..timing.run_fit import fit_runs, render, report_lines
    from ..util.atomic import atomic_writer, check_distinct_outputs

    inputs: dict[str, Path | None] = {f"RUN ({p})": p for p in runs}
    inputs.update({f"--holdout ({p})": p for p in holdout})
    check_distinct_outputs({"--output": output}, {**inputs, "--deployment": deployment})
    result = fit_runs(runs, deployment, holdout)
    command = "tickgate timing fit " + " ".join(p.name for p in runs) + f" --deployment {deployment.name}"
    command += "".join(f" --holdout {p.name}" for p in holdout)
    text = render(result, command)  # everything computed before the output is touched
    with atomic_writer(output) as fh:
        fh.write(text)
    click.echo("\n".join(report_lines(result)))


def _measurements(path: Path, points_format: str, models: Path | None, *, read: Any) -> list[Any]:
    """The rows of a silicon CSV (``--format aiconfigurator-silicon``, which needs ``--models``),
    else what ``read(path)`` makes of the file (the command's own format)."""
    if points_format == "aiconfigurator-silicon":
        from ..timing.silicon import read_silicon

        if models is None:
            raise click.UsageError("--format aiconfigurator-silicon needs --models DIR (the model configs)")
        return read_silicon(path, models)
    if models is not None:
        raise click.UsageError("--models is for --format aiconfigurator-silicon")
    loaded: list[Any] = read(path)
    return loaded


def _read_points(path: Path) -> list[Any]:
    from ..timing.points import read_points

    return list(read_points(path))
