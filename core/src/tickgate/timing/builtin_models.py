"""Entry point ``timing = tickgate.timing.builtin_models``: the built-in timing models (``linear``,
``roofline``) and the ``expected-performance`` gate signal, registered through the same hooks and
entry-point group as a third party's. The signal registers here, not with the other signals in
:mod:`tickgate.gate.signals`, because it replays the candidate's traffic: the replay sits above the
gate in the layers, and :mod:`tickgate.timing` may import both."""

from __future__ import annotations

from ..host.hookspecs import Register, hookimpl


@hookimpl
def register_timing_models(register: Register) -> None:
    from .linear import LinearTiming
    from .roofline import RooflineTiming

    register(LinearTiming)
    register(RooflineTiming)


@hookimpl
def register_gate_signals(register: Register) -> None:
    from .expected import ExpectedPerformance

    register(ExpectedPerformance)
