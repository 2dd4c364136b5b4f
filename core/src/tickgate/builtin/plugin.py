"""Entry point ``tickgate = tickgate.builtin.plugin``: the built-in plugins.

Implementation modules are imported inside the hooks so that loading this
module costs nothing for commands that do not use them.
"""

from __future__ import annotations

from ..hookspecs import Register, hookimpl


@hookimpl
def register_schedulers(register: Register) -> None:
    from .seed import SeedScheduler

    register(SeedScheduler)


@hookimpl
def register_kv_allocators(register: Register) -> None:
    from .paged import PagedAllocator

    register(PagedAllocator)


@hookimpl
def register_admission_policies(register: Register) -> None:
    from .priority_fcfs import PriorityFcfs

    register(PriorityFcfs)


@hookimpl
def register_timing_models(register: Register) -> None:
    from ..replay.timing import LinearTiming
    from ..timing.roofline import RooflineTiming

    register(LinearTiming)
    register(RooflineTiming)


@hookimpl
def register_routers(register: Register) -> None:
    from ..fleet.routers import LeastLoaded, PowerOfTwo, PrefixAware, RoundRobin, SessionAffinity

    for router in (RoundRobin, LeastLoaded, PowerOfTwo, SessionAffinity, PrefixAware):
        register(router)
