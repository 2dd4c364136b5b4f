"""``tickgate conformance vllm``: check the ``vllm-v1`` mirror against a
recorded run of the real vLLM scheduler. Exit 0 only when every step matches."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("conformance")
def conformance_group() -> None:
    """Compare a scheduler mirror with its real engine, step by step."""


@conformance_group.command("vllm")
@click.option("--workload", "workload_path", required=True, type=click.Path(path_type=Path),
              help="Workload in the vllm-reference format (prompt_len, max_output_len, arrival_step).")
@click.option("--reference", "reference_path", required=True, type=click.Path(path_type=Path),
              help="Per-step JSONL written by drive_vllm.py for this workload and config.")
@click.option("--output", "output_path", required=True, type=click.Path(path_type=Path),
              help="Where to write the conformance report (JSON, atomically).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="Config JSON overriding the workload's embedded config (as drive_vllm.py --config).")
def vllm_command(workload_path: Path, reference_path: Path, output_path: Path, config_path: Path | None) -> None:
    """Replay WORKLOAD with vllm-v1 and compare every step with REFERENCE."""
    from tickgate import exit_with, write_json

    from .conformance import compare, load_reference_workload, read_steps, run_mirror

    requests, config = load_reference_workload(workload_path, config_path)
    reference = list(read_steps(reference_path))
    mirror = run_mirror(requests, config)
    report = compare(reference, mirror)
    report = {**report, "workload": str(workload_path), "reference": str(reference_path),
              "config": config, "requests": len(requests)}
    write_json(output_path, report)
    verdict = "identical" if report["first_divergence"] is None else "DIVERGES"
    click.echo(f"vllm conformance: {report['steps_identical']}/{report['steps_total']} steps identical "
               f"({verdict}) -> {output_path}")
    if report["first_divergence"] is not None:
        click.echo(report["first_divergence"]["description"], err=True)
        exit_with(1)
