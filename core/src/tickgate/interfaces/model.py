"""Value types shared by the engine, the schedulers and the report.

Requests arrive from untrusted files, so they are validated once at the
boundary (:mod:`tickgate.workload.format`); inside the engine these classes are plain,
frozen values. Slots keep a million of them affordable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen(slots=True)
class Request:
    """One inference request as the scheduler sees it.

    ``arrival_tick`` is the engine step at which the request joins the queue.
    When ``arrival_ms`` is set the engine maps it onto steps through the timing
    model instead (see ``docs/timing.md``). ``prefix_blocks`` are opaque ids of
    the prompt's KV blocks (block size given by the workload), so two requests
    sharing a leading run of ids share a cacheable prefix.
    """

    id: str
    prompt_tokens: int
    max_output_tokens: int
    priority: int = 0
    arrival_tick: int = 0
    arrival_ms: float | None = None
    tenant: str | None = None
    lane: str | None = None
    deadline_tick: int | None = None
    deadline_ms: float | None = None
    strict_deadline: bool = False
    prefix_blocks: tuple[int, ...] | None = None
    prompt_token_ids: tuple[int, ...] | None = None


@attrs.frozen(slots=True)
class TickRecord:
    """What one engine step decided.

    ``span`` > 1 means ``span`` consecutive steps, starting at ``tick``, that
    made exactly the same decisions (a scheduler may fast-forward over them).
    The canonical serialisation merges such runs, so a record with span 3 and
    three identical records with span 1 fingerprint the same.
    ``detail`` carries scheduler-specific decisions (for example vLLM's
    per-request scheduled token counts); it is part of the fingerprint.
    ``duration_ms`` is the timing model's latency for the whole span; it is a
    consequence of the decisions, not a decision, and is not fingerprinted.
    """

    tick: int
    admitted: tuple[str, ...] = ()
    prefill_tokens: int = 0
    decoded: tuple[str, ...] = ()
    decode_tokens: int = 0
    queued: int = 0
    active: int = 0
    kv_pages_used: int = 0
    kv_pages_reserved: int = 0
    completed: tuple[str, ...] = ()
    preempted: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    span: int = 1
    duration_ms: float | None = None
    detail: Mapping[str, Any] | None = None

    def canonical(self) -> dict[str, Any]:
        """The fingerprinted fields, without tick/span (see docs/report.md)."""
        out: dict[str, Any] = {
            "admitted": list(self.admitted),
            "prefill_tokens": self.prefill_tokens,
            "decoded": list(self.decoded),
            "decode_tokens": self.decode_tokens,
            "queued": self.queued,
            "active": self.active,
            "kv_pages_used": self.kv_pages_used,
            "kv_pages_reserved": self.kv_pages_reserved,
            "completed": list(self.completed),
            "preempted": list(self.preempted),
            "rejected": list(self.rejected),
        }
        if self.detail:
            out["detail"] = self.detail
        return out

    def to_json(self) -> dict[str, Any]:
        out = {"tick": self.tick, "span": self.span, **self.canonical()}
        if self.duration_ms is not None:
            out["duration_ms"] = round(self.duration_ms, 6)
        return out


# The slots TickRecord's fields live in, set directly (attrs' frozen __init__
# goes through object.__setattr__, and keyword arguments cost their matching).
(
    _set_tick,
    _set_admitted,
    _set_prefill_tokens,
    _set_decoded,
    _set_decode_tokens,
    _set_queued,
    _set_active,
    _set_kv_pages_used,
    _set_kv_pages_reserved,
    _set_completed,
    _set_preempted,
    _set_rejected,
    _set_span,
    _set_duration_ms,
    _set_detail,
) = (TickRecord.__dict__[a.name].__set__ for a in attrs.fields(TickRecord))
_new = object.__new__


def tick_record(
    tick: int,
    admitted: tuple[str, ...],
    prefill_tokens: int,
    decoded: tuple[str, ...],
    decode_tokens: int,
    queued: int,
    active: int,
    kv_pages_used: int,
    kv_pages_reserved: int,
    completed: tuple[str, ...],
    preempted: tuple[str, ...],
    rejected: tuple[str, ...],
    span: int,
    duration_ms: float | None,
    detail: Mapping[str, Any] | None,
) -> TickRecord:
    """``TickRecord(...)`` with every field given, in field order, for a scheduler
    that builds one per step: the same frozen value in about 60 % of the time of
    the keyword constructor (a large replay builds hundreds of thousands). Nothing
    is checked here that the constructor would check (it checks nothing either)."""
    record = _new(TickRecord)
    _set_tick(record, tick)
    _set_admitted(record, admitted)
    _set_prefill_tokens(record, prefill_tokens)
    _set_decoded(record, decoded)
    _set_decode_tokens(record, decode_tokens)
    _set_queued(record, queued)
    _set_active(record, active)
    _set_kv_pages_used(record, kv_pages_used)
    _set_kv_pages_reserved(record, kv_pages_reserved)
    _set_completed(record, completed)
    _set_preempted(record, preempted)
    _set_rejected(record, rejected)
    _set_span(record, span)
    _set_duration_ms(record, duration_ms)
    _set_detail(record, detail)
    return record


@attrs.frozen(slots=True)
class RequestOutcome:
    """How one request ended: ``completed`` or ``rejected`` (with a reason).

    Ticks are engine steps; the ``*_ms`` fields come from the timing model and
    are None when the policy has none. ``admitted_ms`` is when the step that
    admitted the request (``admitted_tick``: its first admission) started, so
    ``admitted_ms - arrival_ms`` is its wait in the queue; ``first_token_ms`` and
    ``finished_ms`` are the ends of the steps that sampled its first and last token.
    """

    id: str
    status: str
    arrival_tick: int
    reason: str | None = None
    admitted_tick: int | None = None
    first_token_tick: int | None = None
    finished_tick: int | None = None
    output_tokens: int = 0
    prompt_tokens: int = 0
    preemptions: int = 0
    prefix_hit_tokens: int = 0
    priority: int = 0
    tenant: str | None = None
    lane: str | None = None
    deadline_missed: bool | None = None
    arrival_ms: float | None = None
    admitted_ms: float | None = None
    first_token_ms: float | None = None
    finished_ms: float | None = None
    flags: tuple[str, ...] = ()
    #: a rejection's reason without the request's own numbers: what a report counts
    #: rejections by (``reason`` says "needs 2053 KV blocks ...", different for every
    #: request of a long trace); None groups by ``reason`` itself
    reason_key: str | None = None
    #: the numbers taken out of ``reason`` for ``reason_key``, as (name, value) pairs
    reason_figures: tuple[tuple[str, int], ...] = ()

    @property
    def queue_ticks(self) -> int | None:
        if self.admitted_tick is None:
            return None
        return self.admitted_tick - self.arrival_tick


def completed_outcome(
    request: Request,
    *,
    arrival_tick: int,
    admitted_tick: int | None,
    first_token_tick: int | None,
    finished_tick: int,
    output_tokens: int,
    arrival_ms: float | None = None,
    admitted_ms: float | None = None,
    first_token_ms: float | None = None,
    finished_ms: float | None = None,
    preemptions: int = 0,
    prefix_hit_tokens: int = 0,
    flags: tuple[str, ...] = (),
) -> RequestOutcome:
    """The outcome of a request that finished at the end of ``finished_tick``.

    Every scheduler builds completions here so that deadline accounting means
    the same everywhere: a tick deadline is missed when the request finishes
    after the step before it; a ms deadline when it finishes after that time.
    """
    missed = None
    if request.deadline_tick is not None:
        missed = finished_tick + 1 > request.deadline_tick
    elif request.deadline_ms is not None and finished_ms is not None:
        missed = finished_ms > request.deadline_ms
    return RequestOutcome(
        id=request.id,
        status="completed",
        arrival_tick=arrival_tick,
        admitted_tick=admitted_tick,
        first_token_tick=first_token_tick,
        finished_tick=finished_tick,
        output_tokens=output_tokens,
        prompt_tokens=request.prompt_tokens,
        preemptions=preemptions,
        prefix_hit_tokens=prefix_hit_tokens,
        priority=request.priority,
        tenant=request.tenant,
        lane=request.lane,
        deadline_missed=missed,
        arrival_ms=request.arrival_ms if request.arrival_ms is not None else arrival_ms,
        admitted_ms=admitted_ms,
        first_token_ms=first_token_ms,
        finished_ms=finished_ms,
        flags=flags,
    )


def rejected_outcome(
    request: Request,
    reason: str,
    *,
    tick: int,
    arrival_tick: int | None = None,
    arrival_ms: float | None = None,
    key: str | None = None,
    figures: Mapping[str, int] | None = None,
) -> RequestOutcome:
    """The outcome of a request a scheduler or policy refused at ``tick``, with the reason.

    A reason that quotes the request's own numbers gives ``key`` (the same text with
    the numbers taken out) and the numbers as ``figures``, so that a report counts
    one reason, not one per request (:class:`~tickgate.replay.report.SummarySink`).
    """
    return RequestOutcome(
        id=request.id,
        status="rejected",
        reason=reason,
        arrival_tick=arrival_tick if arrival_tick is not None else tick,
        finished_tick=tick,
        prompt_tokens=request.prompt_tokens,
        priority=request.priority,
        tenant=request.tenant,
        lane=request.lane,
        arrival_ms=request.arrival_ms if request.arrival_ms is not None else arrival_ms,
        reason_key=key,
        reason_figures=tuple(figures.items()) if figures else (),
    )
