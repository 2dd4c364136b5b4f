"""``tickgate validate``: check policy files without running anything."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("validate")
@click.argument("policies", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate_command(policies: tuple[Path, ...]) -> None:
    """Check policy files: schema, plugin names, each plugin's options, and that
    the plugins build together (what replay would refuse, validate refuses).
    Every file is checked: one line each, exit status 2 if any is refused."""
    from ..host.policy import load_policy
    from ..simulate import check_buildable
    from ..util.errors import TickgateError, one_line
    from .cli import exit_with

    refused = 0
    for path in policies:
        try:
            policy = load_policy(path)
            check_buildable(policy)  # a fleet's replicas and routers too, as replay builds them
            chosen = [f"{k}={v.plugin.name}" for k, v in policy.selections.items()]
            if "gate" in policy.data:
                from ..gate.config import load_gate_config

                gate = load_gate_config(policy)
                chosen.append(f"gate signals={','.join(s.info.name for s in gate.signals)}")
        except TickgateError as exc:
            if len(policies) == 1:
                raise  # the CLI prints it, exit status 2
            refused += 1
            click.echo(f"error: {one_line(str(exc).strip())}", err=True)
            continue
        click.echo(f"{path}: ok ({'; '.join(chosen) or 'no plugins'})")
    if refused:
        exit_with(2)
