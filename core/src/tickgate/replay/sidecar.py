"""The fingerprint and summary sinks in a forked child: the sidecar.

Rolling records up (the canonical body of every record, SHA-256, counters,
per-request distributions) is a sixth of a large replay and does not feed back
into scheduling, so on a second core a child runs the two sinks while the
parent schedules. The parent hands each event over as plain values, in
batches, as frames through a pipe (:mod:`tickgate.parallel.frames`:
``marshal``, or ``pickle`` for a batch marshal refuses, such as a third-party
scheduler's exotic ``detail``); the child rebuilds the
records and outcomes and feeds them to the same :class:`FingerprintSink` and
:class:`SummarySink` code, in the same order, then sends back the digest and
the summary sink. The report is byte-identical to an in-process run
(tests/test_sidecar.py); only where the work happens changes.

A problem in the child (it should have none: the sinks are ours) surfaces as
an error when the parent collects the results.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any

import attrs

from ..interfaces.model import Request, RequestOutcome, TickRecord, tick_record
from ..parallel.helper import Channel, Helper
from .fingerprint import EncodedDetail, FingerprintSink
from .report import SummarySink

#: events per message
BATCH = 512

# records travel as their fields but detail, rebuilt as tick_record(*fields, detail)
assert attrs.fields(TickRecord)[-1].name == "detail"
_RECORD_FIELDS = tuple(a.name for a in attrs.fields(TickRecord))[:-1]
_record_fields = attrgetter(*_RECORD_FIELDS)
_outcome_fields = attrgetter(*(a.name for a in attrs.fields(RequestOutcome)))
_ARRIVAL, _RECORD, _ENCODED, _OUTCOME, _ENCODED_TEXT = 0, 1, 2, 3, 4
#: the detail of a record past the summary's detail_limit: only its JSON is
#: used (by the fingerprint), so only that travels; the dict just has to be truthy
_DETAIL_NOT_KEPT = {"not kept": True}


class _Arrival:
    """What the sinks read of an arriving request (SummarySink.arrival)."""

    __slots__ = ("arrival_ms", "lane", "prompt_tokens", "tenant")

    def __init__(
        self, prompt_tokens: int, tenant: str | None, lane: str | None, arrival_ms: float | None
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.tenant = tenant
        self.lane = lane
        self.arrival_ms = arrival_ms


class Sidecar:
    """A sink for :func:`tickgate.replay.engine.run` that forwards to a child running
    a :class:`FingerprintSink` and a :class:`SummarySink`; :meth:`finish` returns
    (fingerprint, summary sink). Always end it with :meth:`finish` or :meth:`close`."""

    def __init__(self, detail_limit: int, *, every_sample: bool = True) -> None:
        self._events: list[Any] = []
        self._kept = detail_limit  # records whose detail the summary still keeps (SummarySink.ticks)
        self._helper = Helper(
            lambda channel: _serve(channel, detail_limit, every_sample),
            to_child=True,
            role="computing the fingerprint and summary",
            instead="computes them in this process instead",
            doing="computing the fingerprint and summary",
        ).start()
        self.pid = self._helper.pid

    # -- sink protocol (parent side) ---------------------------------------------
    def arrival(self, request: Request) -> None:
        self._events.append(
            (_ARRIVAL, request.prompt_tokens, request.tenant, request.lane, request.arrival_ms)
        )

    def record(self, record: TickRecord) -> None:
        detail = record.detail
        if type(detail) is EncodedDetail:
            if self._kept > 0:
                self._kept -= 1
                self._events.append((_ENCODED, _record_fields(record), dict(detail), detail.canonical_json))
            else:
                self._events.append((_ENCODED_TEXT, _record_fields(record), detail.canonical_json))
        else:
            self._kept -= 1
            self._events.append((_RECORD, _record_fields(record), detail))
        if len(self._events) >= BATCH:
            self._flush()

    def outcome(self, outcome: RequestOutcome) -> None:
        self._events.append((_OUTCOME, _outcome_fields(outcome)))

    def _flush(self) -> None:
        events, self._events = self._events, []
        self._helper.send(events)

    # -- end ---------------------------------------------------------------------
    def finish(self) -> tuple[str, SummarySink]:
        """Send what is left, and collect (fingerprint hexdigest, summary sink)."""
        try:
            self._flush()
            self._helper.done_sending()
            return self._helper.result()
        finally:
            self.close()

    def close(self) -> None:
        """Stop the child if :meth:`finish` did not run to its end (the replay failed)."""
        self._helper.close()


def _serve(
    channel: Channel, detail_limit: int, every_sample: bool
) -> tuple[str, SummarySink]:  # pragma: no cover - in the child
    fingerprint = FingerprintSink()
    summary = SummarySink(detail_limit=detail_limit, every_sample=every_sample)
    for events in channel:  # until the parent is done: all events are in
        _replay_events(events, fingerprint, summary)
    return fingerprint.hexdigest(), summary


def _replay_events(
    events: list[Any], fingerprint: FingerprintSink, summary: SummarySink
) -> None:  # pragma: no cover - runs in the child
    fp_record, sm_record, sm_arrival, sm_outcome = (
        fingerprint.record,
        summary.record,
        summary.arrival,
        summary.outcome,
    )
    # tick_record(*(*fields, detail)): one splat (as fast as ``*fields, detail``, which mypy takes
    # for too many arguments when the fields are Any)
    for event in events:
        kind = event[0]
        if kind == _ENCODED_TEXT:
            record = tick_record(*(*event[1], EncodedDetail(_DETAIL_NOT_KEPT, event[2])))
            fp_record(record)
            sm_record(record)
        elif kind == _ENCODED:
            record = tick_record(*(*event[1], EncodedDetail(event[2], event[3])))
            fp_record(record)
            sm_record(record)
        elif kind == _RECORD:
            record = tick_record(*(*event[1], event[2]))
            fp_record(record)
            sm_record(record)
        elif kind == _OUTCOME:
            sm_outcome(RequestOutcome(*event[1]))
        else:
            sm_arrival(_Arrival(event[1], event[2], event[3], event[4]))
