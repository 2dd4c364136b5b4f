"""Replay a workload on one engine under a policy and build the report (a fleet is
:mod:`tickgate.fleet`; :func:`tickgate.simulate.replay` chooses between them)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..host.policy import Policy
from ..interfaces import Clock, optional_attribute
from ..interfaces.model import Request
from ..util.atomic import atomic_writer
from ..util.errors import InputError, TickLimitExceeded
from .engine import build_scheduler, run
from .fingerprint import FingerprintSink, TraceSink
from .report import DETAIL_LIMIT, SummarySink
from .sidecar import Sidecar

#: what the error for a timed workload under an untimed policy suggests adding:
#: docs/timing.md's example, as one line of YAML (tests parse it and replay with it)
TIMING_EXAMPLE = (
    "timing: {name: linear, options: {fixed_ms: 4.0, per_prefill_token_ms: 0.02, "
    "per_decode_seq_ms: 0.15, per_context_token_ms: 0.0002}}"
)


def replay_engine(
    requests: Iterable[Request],
    policy: Policy,
    *,
    trace_path: Path | str | None = None,
    inputs: dict[str, Any] | None = None,
    detail_limit: int = DETAIL_LIMIT,
    prefix_block_size: int | None = None,
    sidecar: bool = False,
    max_concurrency: int | None = None,
    kv_events_path: Path | str | None = None,
    extra_sinks: Iterable[Any] = (),
) -> dict[str, Any]:
    """Run ``requests`` through the policy's scheduler; return the report.

    The optional JSONL trace is written incrementally and atomically: it only
    appears if the replay finishes. ``sidecar``: compute the fingerprint and
    summary in a forked child (:mod:`tickgate.replay.sidecar`; same report).
    ``max_concurrency``: closed-loop clients, at most this many requests in
    flight (default: the workload header's, ``inputs["max_concurrency"]``).
    ``kv_events_path``: also write the scheduler's KV-cache events there (vLLM's
    msgpack batches, :mod:`tickgate.replay.kv_events_out`), atomically, and add
    the report's ``kv_events`` block; a scheduler that cannot record them is refused.
    ``extra_sinks``: more sinks (``arrival``, ``record``, ``outcome``) that see every
    request and step, e.g. ``tickgate plan``'s goodput count, which needs every
    outcome, not the report's first ``detail_limit``.
    """
    clock = Clock()
    scheduler, built = build_scheduler(policy, clock, prefix_block_size=prefix_block_size)
    label = f'scheduler "{built["scheduler"]["name"]}"'
    if kv_events_path is not None:
        from ..interfaces.kv_events import records_kv_events

        if not records_kv_events(scheduler):
            name = built["scheduler"]["name"]
            raise InputError(
                policy.path,
                f'scheduler "{name}" does not record KV-cache '
                "events; --kv-events needs one that does, such as vllm-v1 (docs/vllm.md, "
                '"KV events")',
                **policy.locate("scheduler", "name"),
            )
        scheduler.enable_kv_events()
    kv_writer = None
    with contextlib.ExitStack() as stack:
        side: Sidecar | None = None
        every_sample = bool(optional_attribute(scheduler, "decoded_lists_every_sample"))
        if sidecar:
            side = Sidecar(detail_limit, every_sample=every_sample)
            stack.callback(side.close)
            sinks: list[Any] = [side]
        else:
            fingerprint = FingerprintSink()
            summary = SummarySink(detail_limit=detail_limit, every_sample=every_sample)
            sinks = [fingerprint, summary]
        sinks.extend(extra_sinks)
        if trace_path is not None:
            sinks.append(TraceSink(stack.enter_context(atomic_writer(trace_path))))
        it = iter(requests)
        first = next(it, None)
        timed = first is not None and first.arrival_ms is not None
        if kv_events_path is not None:
            from .kv_events_out import KvEventSink, KvEventWriter

            kv_writer = KvEventWriter(stack.enter_context(atomic_writer(kv_events_path, binary=True)))
            sinks.append(KvEventSink(scheduler, clock, kv_writer, timed=timed))
        if timed and policy.timing is None:
            raise InputError(
                policy.path,
                "the workload gives arrivals in ms (arrival_ms); the policy needs a "
                "'timing' section to map them onto steps: add one to "
                + ("a copy of this bundled policy" if policy.source.startswith("bundled:") else "the policy")
                + f", e.g. `{TIMING_EXAMPLE}` (docs/timing.md)",
                json_path="$.timing",
            )
        stream = _chain(first, it)
        try:
            run(
                stream,
                scheduler,
                clock,
                sinks,
                timed=timed,
                max_ticks=policy.max_ticks,
                label=label,
                max_concurrency=max_concurrency,
                timing=policy.timing,
            )
        except TickLimitExceeded as exc:
            if policy.max_ticks is not None:
                raise InputError(
                    policy.path,
                    f"replay exceeded the tick limit of {exc.limit} steps (raise it if this is expected)",
                    **policy.locate("limits", "max_ticks"),
                ) from None
            raise InputError(
                policy.path,
                f"replay exceeded the default tick limit of {exc.limit} steps (set "
                "limits.max_ticks in the policy if this is expected)",
            ) from None
        if side is None:
            digest = fingerprint.hexdigest()
        else:
            digest, summary = side.finish()
    inputs = dict(inputs or {})
    if max_concurrency is not None:
        inputs["max_concurrency"] = max_concurrency
    inputs["policy"] = policy.source or policy.path
    if policy.timing is not None:
        inputs["timing"] = policy.timing.to_json()
    report = summary.report(
        total_ticks=clock.tick,
        kv_capacity=scheduler.kv_capacity_pages(),
        decode_slots=scheduler.decode_slots_per_tick(),
        final_kv=scheduler.kv_used_pages(),
        fingerprint=digest,
        extra=scheduler.extra_summary(),
        built=built,
        inputs=inputs,
        timed=policy.timing is not None,
        busy_ms=clock.now_ms - clock.idle_ms if policy.timing is not None else None,
        frontend_ms=policy.timing.frontend_ms if policy.timing is not None else 0.0,
    )
    if kv_writer is not None:
        report["kv_events"] = kv_writer.counts.to_json()
    return report


def _chain(first: Request | None, rest: Iterable[Request]) -> Iterable[Request]:
    if first is None:
        return
    yield first
    yield from rest
