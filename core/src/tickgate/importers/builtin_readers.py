"""Entry point ``importers = tickgate.importers.builtin_readers``: the built-in trace
readers (mooncake, azure, burstgpt, splitwise) and benchmark-client readers (aiperf,
genai-perf; vllm's and sglang's clients are their adapters'), registered through the same
hook and entry-point group as a third party's. Modules import on use."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_workload_readers(register: Register) -> None:
    from .azure import AzureReader
    from .client_formats import AiperfReader, GenaiPerfReader
    from .burstgpt import BurstGptReader
    from .mooncake import MooncakeReader
    from .splitwise import SplitwiseReader

    register(MooncakeReader)
    register(AzureReader)
    register(BurstGptReader)
    register(SplitwiseReader)
    register(AiperfReader)
    register(GenaiPerfReader)
