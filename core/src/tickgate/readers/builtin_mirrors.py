"""Entry point ``readers = tickgate.readers.builtin_mirrors``: the generic backend
mirrors (neutral observations, aiperf, genai-perf, tickgate replay reports), registered through the same
hooks and entry-point group as a third party's."""

from __future__ import annotations

from typing import Any

from ..host.hookspecs import hookimpl


@hookimpl
def register_backend_mirrors(register: Any) -> None:
    from .aiperf import AiperfMirror
    from .genai_perf import GenaiPerfMirror
    from .neutral import NeutralMirror
    from .replay_report import ReplayReportMirror

    register(NeutralMirror)
    register(AiperfMirror)
    register(GenaiPerfMirror)
    register(ReplayReportMirror)
