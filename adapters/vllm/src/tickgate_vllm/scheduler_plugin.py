"""Entry point ``vllm-scheduler = tickgate_vllm.scheduler_plugin``: the vLLM
scheduling mirror (the ``vllm-v1`` scheduler) and the ``conformance vllm``
command. Implementation modules are imported inside the hooks (lazy start-up)."""

from __future__ import annotations

from tickgate import Register, hookimpl


@hookimpl
def register_schedulers(register: Register) -> None:
    from .v1.scheduler import VllmV1Scheduler

    register(VllmV1Scheduler)


@hookimpl
def register_conformance_checks(register: Register) -> None:
    from .conformance import vllm_command

    register(vllm_command)
