"""Entry point ``trtllm-scheduler = tickgate_trtllm.scheduler_plugin``: the trtllm
scheduling mirror (scheduler plugins), imported lazily inside the hooks."""

from __future__ import annotations

from tickgate import Register, hookimpl


@hookimpl
def register_schedulers(register: Register) -> None:
    from .scheduler import TrtllmScheduler

    register(TrtllmScheduler)
