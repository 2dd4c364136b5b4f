"""``tickgate plugins``: what is installed, from which distribution, and what failed to load."""

from __future__ import annotations

import json

import click


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins_command(as_json: bool) -> None:
    """List every installed plugin: kind, name, distribution, version.

    A plugin that failed to load is a row of kind ``broken`` with the reason
    (exit status 0: this is where to look); every other command refuses to run
    until it is fixed or disabled (TICKGATE_DISABLE_PLUGINS)."""
    from ..host.registry import get_registry

    registry = get_registry(allow_broken=True)
    rows = [p.to_json() for p in registry] + [b.to_json() for b in registry.broken]
    if registry.broken:
        names = ",".join(sorted({b.source.distribution for b in registry.broken}))
        click.echo(
            f"warning: {len(registry.broken)} plugin(s) failed to load; other commands refuse to run "
            f"until fixed or disabled (TICKGATE_DISABLE_PLUGINS={names})",
            err=True,
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    width = max((len(r["name"]) for r in rows), default=4)
    kind_width = max((len(r["kind"]) for r in rows), default=4)
    for r in rows:
        click.echo(
            f"{r['kind']:<{kind_width}}  {r['name']:<{width}}  {r['distribution']} {r['version']}"
            + (f"  {r['description']}" if r["description"] else "")
        )
