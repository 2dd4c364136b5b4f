"""``tickgate validate`` and ``tickgate plugins``."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("validate")
@click.argument("policies", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate_command(policies: tuple[Path, ...]) -> None:
    """Check policy files: schema, plugin names, each plugin's options, and that
    the plugins build together (what replay would refuse, validate refuses).
    Every file is checked: one line each, exit status 2 if any is refused."""
    from ..cli import exit_with
    from ..engine import build_scheduler
    from ..errors import TickgateError, one_line
    from ..interfaces import Clock
    from ..policy import load_policy

    refused = 0
    for path in policies:
        try:
            policy = load_policy(path)
            if policy.selection("scheduler") is not None:
                build_scheduler(policy, Clock())
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


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_command(as_json: bool) -> None:
    """List every installed plugin: kind, name, distribution, version.

    A plugin that failed to load is a row of kind ``broken`` with the reason
    (exit status 0: this is where to look); every other command refuses to run
    until it is fixed or disabled (TICKGATE_DISABLE_PLUGINS)."""
    from ..plugins import get_registry

    registry = get_registry(allow_broken=True)
    rows = [p.to_json() for p in registry] + [b.to_json() for b in registry.broken]
    if registry.broken:
        names = ",".join(sorted({b.source.distribution for b in registry.broken}))
        click.echo(f"warning: {len(registry.broken)} plugin(s) failed to load; other commands refuse to run "
                   f"until fixed or disabled (TICKGATE_DISABLE_PLUGINS={names})", err=True)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    width = max((len(r["name"]) for r in rows), default=4)
    kind_width = max((len(r["kind"]) for r in rows), default=4)
    for r in rows:
        click.echo(f"{r['kind']:<{kind_width}}  {r['name']:<{width}}  {r['distribution']} {r['version']}"
                   + (f"  {r['description']}" if r["description"] else ""))
