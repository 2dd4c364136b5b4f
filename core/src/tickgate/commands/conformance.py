"""``tickgate conformance ENGINE``: the group whose subcommands are the engine
adapters' conformance checks (kind ``conformance``, registered with
``register_conformance_checks``). Several adapters add one each, so the group
itself is tickgate's; the shared comparison is :mod:`tickgate.conformance.check`."""

from __future__ import annotations

import click

from ..util.errors import TickgateError


class _ChecksGroup(click.Group):
    """Subcommands from the registry, listed leniently (``--help`` works with a
    broken plugin) and run fail-closed, as the top-level plugin commands are."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from ..host.registry import get_registry

        try:
            return get_registry(allow_broken=True).names("conformance")
        except TickgateError:
            return []

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        from ..host.registry import get_registry

        if name not in self.list_commands(ctx):
            return None
        return get_registry(allow_broken=True).get("conformance", name).obj

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        from ..host.registry import get_registry

        resolved = super().resolve_command(ctx, args)
        get_registry()
        return resolved


@click.group("conformance", cls=_ChecksGroup)
def conformance_group() -> None:
    """Compare a scheduler mirror with its real engine, step by step."""
