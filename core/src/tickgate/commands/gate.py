"""``tickgate gate``: decide promote / hold / rollback for a candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..util.atomic import check_distinct_outputs, write_json
from ..util.errors import InputError


@click.command("gate")
@click.option(
    "--input",
    "bundle",
    type=click.Path(path_type=Path),
    default=None,
    help="Gate bundle JSON holding baseline and candidate observations.",
)
@click.option(
    "--baseline",
    type=click.Path(path_type=Path),
    default=None,
    help="Baseline observations: neutral JSON or any file an installed backend mirror reads.",
)
@click.option(
    "--candidate",
    type=click.Path(path_type=Path),
    default=None,
    help="Candidate observations (same traffic, joined by request_id).",
)
@click.option(
    "--format",
    "format_",
    default="auto",
    show_default=True,
    help="Format of --baseline/--candidate: auto, neutral or a backend mirror name.",
)
@click.option(
    "--output",
    "output_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write the gate report (JSON, written atomically).",
)
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Policy YAML with a gate section (default: the bundled policies/gate-default.yaml).",
)
@click.option(
    "--junit-xml",
    "junit_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write the decision as JUnit XML: one test case per signal, failures with their triage.",
)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(path_type=Path),
    default=None,
    help='Also write a Markdown summary (a job summary: --markdown "$GITHUB_STEP_SUMMARY", or a PR comment).',
)
@click.option(
    "--quiet", is_flag=True, help="Do not print the decision and triage (nor progress on a terminal)."
)
def gate_command(
    bundle: Path | None,
    baseline: Path | None,
    candidate: Path | None,
    format_: str,
    output_path: Path,
    policy_path: Path | None,
    junit_path: Path | None,
    markdown_path: Path | None,
    quiet: bool,
) -> None:
    """Gate a release. Exit 0 promote, 10 hold, 11 inconclusive, 20 rollback, 2 invalid input.

    Inside GitHub Actions (GITHUB_ACTIONS=true) it also prints an annotation per failed
    signal and one for the decision, --quiet or not."""
    from ..gate.pipeline import gate_files
    from ..util.progress import progress
    from ..util.schemas import data_file
    from .cli import exit_with

    if bundle is not None and (baseline is not None or candidate is not None):
        raise InputError(bundle, "give either --input or --baseline and --candidate, not both")
    if bundle is None and (baseline is None or candidate is None):
        raise InputError(None, "give --input BUNDLE, or both --baseline and --candidate")
    check_distinct_outputs(
        {"--output": output_path, "--junit-xml": junit_path, "--markdown": markdown_path},
        {"--input": bundle, "--baseline": baseline, "--candidate": candidate},
    )
    policy = policy_path if policy_path is not None else data_file("policies", "gate-default.yaml")
    with progress("gate", unit=" steps", quiet=quiet) as bar:  # on a terminal only
        report = gate_files(
            policy, bundle=bundle, baseline=baseline, candidate=candidate, format=format_, progress=bar
        )
    write_json(output_path, report)
    _ci_outputs(report, junit_path, markdown_path)
    if not quiet:
        click.echo(f"{report['summary']} (matched {report['join']['matched']}) -> {output_path}")
        for item in report["triage"]:
            flag = " [dry-run]" if item["dry_run"] else ""
            click.echo(f"  {item['status']}{flag} {item['signal']}: {item['message']}")
            click.echo(f"    next: {item['next_action']}")
        for item in report.get("not_evaluated", ()):
            flag = " [dry-run]" if item["dry_run"] else ""
            click.echo(f"  not evaluated{flag} {item['signal']}: {item['message']}")
    exit_with(report["exit_code"])


def _ci_outputs(report: dict[str, Any], junit_path: Path | None, markdown_path: Path | None) -> None:
    """What a CI system reads (:mod:`tickgate.gate.ci`), written atomically like the report."""
    from ..gate.ci import annotations
    from ..util.atomic import atomic_writer

    if junit_path is not None:
        from ..gate.ci.junit import junit_xml

        with atomic_writer(junit_path, binary=True) as fh:
            fh.write(junit_xml(report))
    if markdown_path is not None:
        from ..gate.ci.markdown import gate_markdown

        with atomic_writer(markdown_path) as fh:
            fh.write(gate_markdown(report))
    if annotations.wanted():
        for line in annotations.workflow_commands(report):
            click.echo(line)
