"""Entry point ``client-runs = tickgate.client_runs.builtin_readers``: the workload readers of aiperf and
genai-perf runs (vllm's and sglang's clients are their adapters'), registered through the same hook and
entry-point group as a third party's. Modules import on use."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_workload_readers(register: Register) -> None:
    from .formats import AiperfReader, GenaiPerfReader

    register(AiperfReader)
    register(GenaiPerfReader)
