"""Entry point ``timing = tickgate.timing.builtin_models``: the built-in timing models (``linear``,
``roofline``), registered through the same hook and entry-point group as a third party's."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_timing_models(register: Register) -> None:
    from .linear import LinearTiming
    from .roofline import RooflineTiming

    register(LinearTiming)
    register(RooflineTiming)
