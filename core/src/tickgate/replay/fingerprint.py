"""A replay's fingerprint and trace: every record's canonical JSON body (a ``detail`` may carry its
own, :class:`EncodedDetail`), hashed in order into the trace fingerprint (:class:`FingerprintSink`)
or written one line per record (:class:`TraceSink`, ``--trace``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..interfaces.model import Request, RequestOutcome, TickRecord
from ..util.jsonio import dumps_line, plain_float, stdlib_line


def _detail_encoder() -> Any:
    """What ``_DETAIL_JSON.encode`` builds on every call (the C encoder), built once."""
    if _c_make_encoder is None:  # pragma: no cover - pure-Python json
        return None
    return _c_make_encoder({}, _DETAIL_JSON.default, _encode_str, None, ":", ",", True, False, True)


_encode_str = json.encoder.encode_basestring_ascii  # what json.dumps uses for str (C when available)
_DETAIL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)


_detail_c = _detail_encoder()


#: (detail, its JSON) of the last record: a fast-forwarded span usually repeats the
#: previous record's detail object (records and their details are immutable values)
_detail_memo: list[Any] = [None, ""]


_ONLY_INT = {int}


class EncodedDetail(dict):
    """A record ``detail`` that carries its own canonical JSON.

    ``canonical_json`` must be exactly ``json.dumps(dict(self), sort_keys=True,
    separators=(",", ":"))``: a scheduler that builds its detail from parts it
    has already encoded (vLLM's per-request ``sched`` entries) saves the
    fingerprint from encoding it again. Everything else sees a plain dict.
    """

    __slots__ = ("canonical_json",)

    def __init__(self, data: dict[str, Any], canonical_json: str) -> None:
        super().__init__(data)
        self.canonical_json = canonical_json


def _encode_detail(detail: Any) -> str:
    global _detail_c
    memo = _detail_memo
    if detail is memo[0]:
        return memo[1]
    if type(detail) is EncodedDetail:
        text = detail.canonical_json
    elif _detail_c is None or type(detail) is not dict:  # pragma: no cover - unusual
        text = _DETAIL_JSON.encode(detail)
    else:
        try:
            text = "".join(_detail_c(detail, 0))
        except BaseException:
            _detail_c = _detail_encoder()  # its circular-reference markers may be left dirty
            raise
    memo[0] = detail
    memo[1] = text
    return text


def canonical_body(record: TickRecord) -> str:
    """``json.dumps(record.canonical(), sort_keys=True, separators=(",", ":"))``,
    byte for byte, without building the dict (the fingerprint's hot path).

    Only plain ints and str ids take the fast path; anything else (an int
    subclass, a non-str id) falls back to ``json.dumps`` itself.
    """
    r = record
    ints = (r.active, r.decode_tokens, r.kv_pages_reserved, r.kv_pages_used, r.prefill_tokens, r.queued)
    if set(map(type, ints)) != _ONLY_INT:
        return json.dumps(r.canonical(), sort_keys=True, separators=(",", ":"))
    enc = _encode_str
    try:
        # most lists are empty in most records: skip the join machinery for them
        admitted = ",".join(map(enc, r.admitted)) if r.admitted else ""
        completed = ",".join(map(enc, r.completed)) if r.completed else ""
        decoded = ",".join(map(enc, r.decoded)) if r.decoded else ""
        preempted = ",".join(map(enc, r.preempted)) if r.preempted else ""
        rejected = ",".join(map(enc, r.rejected)) if r.rejected else ""
    except TypeError:
        return json.dumps(r.canonical(), sort_keys=True, separators=(",", ":"))
    detail = f',"detail":{_encode_detail(r.detail)}' if r.detail else ""
    return (
        f'{{"active":{ints[0]},"admitted":[{admitted}],"completed":[{completed}],'
        f'"decode_tokens":{ints[1]},"decoded":[{decoded}]{detail},"kv_pages_reserved":{ints[2]},'
        f'"kv_pages_used":{ints[3]},"preempted":[{preempted}],"prefill_tokens":{ints[4]},'
        f'"queued":{ints[5]},"rejected":[{rejected}]}}'
    )


class FingerprintSink:
    """Running SHA-256 over the canonical, run-merged tick serialisation."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._pending: tuple[int, int, str] | None = None  # (tick, span, body)
        # finished lines, hashed in batches (one encode and update per batch:
        # the digest of a concatenation does not depend on how it is cut)
        self._lines: list[str] = []

    def arrival(self, request: Request) -> None:
        pass

    def outcome(self, outcome: RequestOutcome) -> None:
        pass

    def record(self, record: TickRecord) -> None:
        body = canonical_body(record)
        pending = self._pending
        if pending is not None and pending[2] == body and pending[0] + pending[1] == record.tick:
            self._pending = (pending[0], pending[1] + record.span, body)
            return
        self._flush()
        self._pending = (record.tick, record.span, body)

    def _flush(self) -> None:
        if self._pending is not None:
            tick, span, body = self._pending
            lines = self._lines
            lines.append(f"{tick} {span} {body}\n")
            if len(lines) >= 256:
                self._hash.update("".join(lines).encode())
                lines.clear()
            self._pending = None

    def hexdigest(self) -> str:
        self._flush()
        if self._lines:
            self._hash.update("".join(self._lines).encode())
            self._lines.clear()
        return self._hash.hexdigest()[:16]


class TraceSink:
    """Writes every record as one JSON line, as it happens."""

    def __init__(self, fh: Any) -> None:
        self.fh = fh

    def arrival(self, request: Request) -> None:
        pass

    def outcome(self, outcome: RequestOutcome) -> None:
        pass

    def record(self, record: TickRecord) -> None:
        # a record's floats: duration_ms, and whatever a scheduler puts in detail
        # (not looked into: a record with detail takes the standard library)
        d = record.duration_ms
        if not record.detail and (d is None or plain_float(round(d, 6))):
            self.fh.write(dumps_line(record.to_json()) + "\n")
        else:
            self.fh.write(stdlib_line(record.to_json()) + "\n")
