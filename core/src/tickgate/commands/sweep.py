"""``tickgate sweep``."""

from __future__ import annotations

from pathlib import Path

import click

from ..sweep.executor import EXECUTORS
from ..sweep.run import INDEX
from ..util.errors import TickgateError
from ..util.words import plural


@click.command("sweep")
@click.argument("sweep_path", metavar="SWEEP.yaml", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "output_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory for results.jsonl and points/<id>/ (created; a re-run reuses finished points).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes (default 1: every point in this process); with --executor ray, "
    "the CPUs of the local Ray instance it starts.",
)
@click.option(
    "--executor",
    type=click.Choice(EXECUTORS),
    default="local",
    show_default=True,
    help="Where points run: local processes, or Ray tasks on the cluster at RAY_ADDRESS (else a "
    "local instance); ray needs pip install 'tickgate[ray]'.",
)
@click.option("--quiet", is_flag=True, help="Do not print the summary (nor progress on a terminal).")
def sweep_command(sweep_path: Path, output_dir: Path, jobs: int | None, executor: str, quiet: bool) -> None:
    """Replay every point of a grid of policy variants over workloads; write
    one line per point to DIR/results.jsonl. Exit status 1 when a point failed
    (its line says why; the others still ran), 2 for a bad sweep file. With the
    'html' extra, also DIR/index.html: the Pareto front and the table."""
    from ..sweep.executor import make_executor
    from ..sweep.run import RESULTS, run_sweep
    from ..sweep.spec import load_sweep
    from ..util.progress import progress

    if output_dir.exists() and not output_dir.is_dir():
        raise TickgateError(f"{output_dir}: --output must be a directory")
    sweep = load_sweep(sweep_path)  # every check before anything is written
    runner = make_executor(executor, jobs)  # a missing Ray too
    with progress("sweep", unit=" points", total=len(sweep.points), quiet=quiet) as bar:
        outcome = run_sweep(sweep, output_dir, executor=runner, on_done=bar.step)
    results = output_dir / RESULTS
    index = write_index(output_dir)
    if not quiet:
        click.echo(
            f"swept {plural(len(sweep.points), 'point')}: {len(outcome.replayed)} replayed, "
            f"{len(outcome.reused)} reused, {len(outcome.failed)} failed -> {results}"
        )
        if index is None:  # stdout, with the summary: not an error, the results are complete
            click.echo(
                f"{output_dir / INDEX} not written: the page needs the 'html' extra "
                "(pip install 'tickgate[html]')"
            )
        else:
            click.echo(f"page -> {index}")
    if outcome.failed:
        first = next(row for row in outcome.rows if "error" in row)
        raise SweepFailed(
            f"{len(outcome.failed)} of {len(sweep.points)} sweep points failed "
            f"(first: {first['id']}: {first['error']}); see {results}"
        )


def write_index(output_dir: Path) -> Path | None:
    """DIR/index.html, the page ``tickgate report DIR --html`` draws (docs/html.md), from the
    results.jsonl just written; None (nothing written) without the optional 'html' extra: a
    sweep's results do not depend on a picture of them."""
    from ..html import build
    from ..html.charts import available
    from ..util.atomic import atomic_writer

    if not available():
        return None

    _, text = build(output_dir)
    with atomic_writer(output_dir / INDEX) as fh:
        fh.write(text)
    return output_dir / INDEX


class SweepFailed(TickgateError):
    """Some points failed: the summary line, exit status 1."""

    exit_code = 1
