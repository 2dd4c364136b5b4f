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
@click.argument("points", type=_PATH)
@click.option(
    "--timing", "timing_file", type=_PATH, help="A timing file (from timing fit) whose factors to use."
)
@click.option("--output", "-o", type=_PATH, required=True, help="Predictions, one JSON line per point.")
def check_command(points: Path, timing_file: Path | None, output: Path) -> None:
    """Replay every point of POINTS (realdata/measured/points.jsonl's format) and
    compare what it predicts with what was measured."""
    from ..timing.check import check_points
    from ..timing.fit import load_timing_file
    from ..timing.points import read_points
    from ..util.atomic import atomic_writer, check_distinct_outputs

    check_distinct_outputs({"--output": output}, {"POINTS": points, "--timing": timing_file})
    loaded = read_points(points)
    timing = load_timing_file(timing_file) if timing_file is not None else None
    results = check_points(loaded, timing.factors_for if timing is not None else None)
    # everything computed before the output is touched: a failure leaves it as it was
    text = "".join(
        json.dumps(
            {"id": r.point.id, "predicted": {k: _round(v) for k, v in r.predicted.items()}},
            sort_keys=True,
        )
        + "\n"
        for r in results
        if r.predicted is not None
    )
    table = [*_table(results), _summary_line("total", results)]
    with atomic_writer(output) as fh:
        fh.write(text)
    click.echo("\n".join(table))


@timing_command.command("fit")
@click.argument("measurements", nargs=-1, required=True, type=_PATH)
@click.option(
    "--base", type=_PATH, required=True, help="The timing file (or policy) whose factors to start from."
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
def fit_command(measurements: tuple[Path, ...], base: Path, output: Path, rounds: int, passes: int) -> None:
    """Fit the roofline's free factors, per engine family, to MEASUREMENTS: measured
    points (realdata/measured/points.jsonl's format), benchmark client runs (any file
    `tickgate normalize` reads; replayed with the base policy's scheduler) and
    TensorRT-LLM iteration statistics. Prints the error before and after."""
    from ..timing.check import check_points, prepare
    from ..timing.fit import fit_family, load_timing_file, write_timing_file
    from ..timing.measurements import read_measurements
    from ..timing.points import family
    from ..timing.roofline import ENGINE_DEFAULTS
    from ..util.atomic import check_distinct_outputs
    from ..util.progress import wanted

    inputs: dict[str, Path | None] = {f"MEASUREMENTS ({path})": path for path in measurements}
    check_distinct_outputs({"--output": output}, {**inputs, "--base": base})
    start = load_timing_file(base)
    points = [p for path in measurements for p in read_measurements(path, start.document, base)]
    prepare(points, start.factors_for)  # every measurement set up before hours of fitting
    fitted: dict[str, dict[str, float]] = {}
    show = (lambda text: click.echo(text, err=True)) if wanted() else None
    for fam in sorted({f for f in map(family, points) if f is not None}):
        factors = {**ENGINE_DEFAULTS[fam], **start.factors_for(fam)}
        fitted[fam], _, _ = fit_family(points, fam, factors, rounds=rounds, passes=passes, progress=show)
    before = check_points(points, start.factors_for)
    after_file = attrs.evolve(start, fitted=fitted)
    after = check_points(points, after_file.factors_for)
    names = ", ".join(p.name for p in measurements)
    write_timing_file(
        output,
        start,
        fitted,
        f"tickgate timing fit {names} --base {base.name} --rounds {rounds} --passes {passes}\n"
        f"{_summary_line('before', before)}\n{_summary_line('after', after)}",
    )
    click.echo(_summary_line("before", before))
    click.echo(_summary_line("after", after))
