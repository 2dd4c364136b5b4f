"""Entry point ``gate = tickgate.gate.plugin``: the built-in gate signals,
registered through the same hook and entry-point group as a third party's."""

from __future__ import annotations

from ..hookspecs import Register, hookimpl


@hookimpl
def register_gate_signals(register: Register) -> None:
    from .signals.errors import ErrorRate
    from .signals.evidence import MatchedTraffic, RouteEvidence, SchedulerEvidence, StreamingEvidence
    from .signals.goodput import Goodput
    from .signals.outputs import NumericDrift, OutputMismatch
    from .signals.prefix_cache import PrefixCacheHitRate
    from .signals.quantiles import DecodeTokenP95, LatencyP95, MemoryPressure, TtftP95
    from .signals.throughput import Throughput

    for signal in (OutputMismatch, NumericDrift, ErrorRate, LatencyP95, TtftP95, DecodeTokenP95,
                   MemoryPressure, RouteEvidence, SchedulerEvidence, StreamingEvidence, MatchedTraffic,
                   Throughput, Goodput, PrefixCacheHitRate):
        register(signal)
