"""Entry point ``fleet = tickgate.fleet.builtin_routers``: the built-in routers of a fleet, registered
through the same hook and entry-point group as a third party's."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_routers(register: Register) -> None:
    from .routers import LeastLoaded, PowerOfTwo, PrefixAware, RoundRobin, SessionAffinity

    for router in (RoundRobin, LeastLoaded, PowerOfTwo, SessionAffinity, PrefixAware):
        register(router)
