"""Entry point ``sglang-scheduler = tickgate_sglang.scheduler_plugin``: the sglang
scheduling mirror (scheduler plugins), imported lazily inside the hooks."""

from __future__ import annotations

from tickgate import Register, hookimpl


@hookimpl
def register_schedulers(register: Register) -> None:
    from .scheduler import SglangScheduler

    register(SglangScheduler)
