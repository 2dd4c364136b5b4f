"""Shared by the vllm-v1 tests: a replay through the registered plugin with its observer on."""

from __future__ import annotations

from typing import Any

from tickgate import Request


def mirror_run(requests: list[Request], options: dict, timing: Any = None) -> tuple[dict, list[dict], list]:
    """The vllm-v1 mirror after replaying ``requests``: its summary, its observed lines, its records."""
    return mirror_run_outcomes(requests, options, timing)[:3]  # type: ignore[return-value]


def mirror_run_outcomes(requests: list[Request], options: dict, timing: Any = None
                        ) -> tuple[dict, list[dict], list, list]:
    """:func:`mirror_run`, and the request outcomes."""
    from tickgate.interfaces import BuildContext, Clock
    from tickgate.plugins import get_registry
    from tickgate.replay.engine import run

    clock = Clock()
    ctx = BuildContext(clock=clock, timing=timing, make_kv_allocator=None, make_admission=None)
    mirror = get_registry().get("scheduler", "vllm-v1").obj.build(options, ctx)
    lines: list[dict] = []
    mirror.observer = lines.append
    records: list = []
    outcomes: list = []

    class _Sink:
        def arrival(self, request):
            pass

        def record(self, record):
            records.append(record)

        def outcome(self, outcome):
            outcomes.append(outcome)

    run(requests, mirror, clock, [_Sink()], timed=timing is not None, label="vllm-v1")
    return mirror.extra_summary(), lines, records, outcomes
