"""Entry point ``seed = tickgate.seed.builtin_scheduler``: the seed scheduler, registered through the
same hook and entry-point group as a third party's (the module loads inside the hook)."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_schedulers(register: Register) -> None:
    from .scheduler import SeedScheduler

    register(SeedScheduler)
