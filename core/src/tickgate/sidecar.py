"""The fingerprint and summary sinks in a forked child: the sidecar.

Rolling records up (the canonical body of every record, SHA-256, counters,
per-request distributions) is a sixth of a large replay and does not feed back
into scheduling, so on a second core a child runs the two sinks while the
parent schedules. The parent hands each event over as plain values, in
batches through a pipe (``marshal``; ``pickle`` for a batch marshal refuses,
such as a third-party scheduler's exotic ``detail``); the child rebuilds the
records and outcomes and feeds them to the same :class:`FingerprintSink` and
:class:`SummarySink` code, in the same order, then sends back the digest and
the summary sink. The report is byte-identical to an in-process run
(tests/test_sidecar.py); only where the work happens changes.

A problem in the child (it should have none: the sinks are ours) surfaces as
an error when the parent collects the results.
"""

from __future__ import annotations

import marshal
import os
import pickle
import signal
from operator import attrgetter
from typing import Any

import attrs

from .errors import TickgateError, error_as_data, error_from_data
from .forking import drop, fork_helper, hold, how_it_ended, pipe, write_all
from .model import Request, RequestOutcome, TickRecord, tick_record
from .report import EncodedDetail, FingerprintSink, SummarySink

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

    __slots__ = ("prompt_tokens", "tenant", "lane")

    def __init__(self, prompt_tokens: int, tenant: str | None, lane: str | None) -> None:
        self.prompt_tokens = prompt_tokens
        self.tenant = tenant
        self.lane = lane


class Sidecar:
    """A sink for :func:`tickgate.engine.run` that forwards to a child running
    a :class:`FingerprintSink` and a :class:`SummarySink`; :meth:`finish` returns
    (fingerprint, summary sink). Always end it with :meth:`finish` or :meth:`close`."""

    def __init__(self, detail_limit: int) -> None:
        self._events: list[Any] = []
        self._kept = detail_limit  # records whose detail the summary still keeps (SummarySink.ticks)
        to_child, self._to_child = pipe()
        self._from_child, from_parent = os.pipe()
        self.pid = fork_helper(lambda: _serve(to_child, from_parent, detail_limit),
                               child_closes=(self._to_child, self._from_child),
                               parent_closes=(to_child, from_parent))
        self._done = False
        hold(self._to_child, self._from_child)

    # -- sink protocol (parent side) ---------------------------------------------
    def arrival(self, request: Request) -> None:
        self._events.append((_ARRIVAL, request.prompt_tokens, request.tenant, request.lane))

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
        try:
            data = b"m" + marshal.dumps(events)
        except ValueError:  # a value marshal does not know (a plugin's detail): pickle knows more
            data = b"p" + pickle.dumps(events, pickle.HIGHEST_PROTOCOL)
        try:
            write_all(self._to_child, len(data).to_bytes(8, "little"))
            write_all(self._to_child, data)
        except BrokenPipeError:
            raise self._died() from None

    def _died(self) -> TickgateError:
        how = how_it_ended(self.pid)
        self._done = True
        return TickgateError(f"the process computing the fingerprint and summary (pid {self.pid}) {how}; "
                             "TICKGATE_PARALLEL=0 computes them in this process instead")

    # -- end ---------------------------------------------------------------------
    def finish(self) -> tuple[str, SummarySink]:
        """Send what is left, and collect (fingerprint hexdigest, summary sink)."""
        try:
            self._flush()
            drop(self._to_child)
            os.close(self._to_child)  # end of events
            self._to_child = -1
            drop(self._from_child)
            with os.fdopen(self._from_child, "rb") as pipe:
                self._from_child = -1
                data = pipe.read()
            if not data:
                raise self._died()
            os.waitpid(self.pid, 0)
            self._done = True
            kind, value = pickle.loads(data)
            if kind != "ok":
                raise error_from_data(kind, value, "computing the fingerprint and summary")
            return value  # type: ignore[no-any-return]
        finally:
            self.close()

    def close(self) -> None:
        """Stop the child if :meth:`finish` did not run to its end (the replay failed)."""
        for fd in (self._to_child, self._from_child):
            if fd >= 0:
                drop(fd)
                os.close(fd)
        self._to_child = self._from_child = -1
        if not self._done:
            self._done = True
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:  # pragma: no cover
                pass
            os.waitpid(self.pid, 0)


def _serve(fd_in: int, fd_out: int, detail_limit: int) -> None:  # pragma: no cover - runs in the child
    fingerprint = FingerprintSink()
    summary = SummarySink(detail_limit=detail_limit)
    try:
        with os.fdopen(fd_in, "rb") as pipe:
            read = pipe.read
            while True:
                head = read(8)
                if len(head) < 8:
                    break  # the parent closed: all events are in
                data = read(int.from_bytes(head, "little"))
                events = marshal.loads(data[1:]) if data[:1] == b"m" else pickle.loads(data[1:])
                _replay_events(events, fingerprint, summary)
        result: tuple[str, Any] = ("ok", (fingerprint.hexdigest(), summary))
    except Exception as exc:  # comes back as data, raised again in the parent
        result = error_as_data(exc)
    write_all(fd_out, pickle.dumps(result, pickle.HIGHEST_PROTOCOL))
    os.close(fd_out)


def _replay_events(events: list[Any], fingerprint: FingerprintSink,
                   summary: SummarySink) -> None:  # pragma: no cover - runs in the child
    fp_record, sm_record, sm_arrival, sm_outcome = (fingerprint.record, summary.record, summary.arrival,
                                                    summary.outcome)
    for event in events:
        kind = event[0]
        if kind == _ENCODED_TEXT:
            record = tick_record(*event[1], EncodedDetail(_DETAIL_NOT_KEPT, event[2]))
            fp_record(record)
            sm_record(record)
        elif kind == _ENCODED:
            record = tick_record(*event[1], EncodedDetail(event[2], event[3]))
            fp_record(record)
            sm_record(record)
        elif kind == _RECORD:
            record = tick_record(*event[1], event[2])
            fp_record(record)
            sm_record(record)
        elif kind == _OUTCOME:
            sm_outcome(RequestOutcome(*event[1]))
        else:
            sm_arrival(_Arrival(event[1], event[2], event[3]))  # type: ignore[arg-type]
