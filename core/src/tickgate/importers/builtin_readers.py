"""Entry point ``importers = tickgate.importers.builtin_readers``: the built-in trace
readers (mooncake, azure, burstgpt, splitwise), registered through the same
hook and entry-point group as a third party's. Modules import on use."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_workload_readers(register: Register) -> None:
    from .azure import AzureReader
    from .burstgpt import BurstGptReader
    from .mooncake import MooncakeReader
    from .splitwise import SplitwiseReader

    register(MooncakeReader)
    register(AzureReader)
    register(BurstGptReader)
    register(SplitwiseReader)
