"""Entry point ``gate = tickgate.gate.signals.builtin_signals``: the built-in gate signals,
registered through the same hook and entry-point group as a third party's."""

from __future__ import annotations

from ...host.hookspecs import Register, hookimpl


@hookimpl
def register_gate_signals(register: Register) -> None:
    from .errors import ErrorRate
    from .evidence import MatchedTraffic, RouteEvidence, SchedulerEvidence, StreamingEvidence
    from .goodput import Goodput
    from .outputs import NumericDrift, OutputMismatch
    from .prefix_cache import PrefixCacheHitRate
    from .quantiles import DecodeTokenP95, LatencyP95, MemoryPressure, TtftP95
    from .throughput import Throughput

    for signal in (
        OutputMismatch,
        NumericDrift,
        ErrorRate,
        LatencyP95,
        TtftP95,
        DecodeTokenP95,
        MemoryPressure,
        RouteEvidence,
        SchedulerEvidence,
        StreamingEvidence,
        MatchedTraffic,
        Throughput,
        Goodput,
        PrefixCacheHitRate,
    ):
        register(signal)
