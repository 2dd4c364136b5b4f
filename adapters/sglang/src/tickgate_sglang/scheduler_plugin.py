"""Entry point ``sglang-scheduler = tickgate_sglang.scheduler_plugin``: the SGLang
scheduling mirror (the ``sglang`` scheduler) and the ``conformance sglang`` check.
Implementation modules are imported inside the hooks (lazy start-up)."""

from __future__ import annotations

from tickgate import Register, hookimpl


@hookimpl
def register_schedulers(register: Register) -> None:
    from .scheduler import SglangScheduler

    register(SglangScheduler)


@hookimpl
def register_conformance_checks(register: Register) -> None:
    from .conformance import sglang_command

    register(sglang_command)
