"""``tickgate report``."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("input_path", metavar="INPUT", type=click.Path(path_type=Path))
@click.option(
    "--html",
    "html_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write the HTML page (self-contained, written atomically).",
)
@click.option("--quiet", is_flag=True, help="Do not print where the page went.")
def report_command(input_path: Path, html_path: Path, quiet: bool) -> None:
    """Draw a replay report (fleet replays too), a gate report or a sweep (its
    output directory or results.jsonl) as one HTML page that opens offline:
    charts as inline SVG, no script, nothing fetched (docs/html.md). Needs
    the 'html' extra: pip install 'tickgate[html]'."""
    from ..html import build
    from ..util.atomic import atomic_writer, check_distinct_outputs

    check_distinct_outputs({"--html": html_path}, {"INPUT": input_path})
    kind, text = build(input_path)
    with atomic_writer(html_path) as fh:
        fh.write(text)
    if not quiet:
        click.echo(f"{kind} report -> {html_path}")
