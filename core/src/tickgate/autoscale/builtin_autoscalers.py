"""Entry point ``autoscale = tickgate.autoscale.builtin_autoscalers``: the built-in autoscalers,
registered through the same hook and entry-point group as a third party's."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_autoscalers(register: Register) -> None:
    from .hpa import Hpa
    from .slo import Slo

    register(Hpa)
    register(Slo)
