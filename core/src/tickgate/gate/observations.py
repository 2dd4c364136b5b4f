"""Observations held column by column: one :class:`Side` per deployment.

A million requests as a million dicts costs gigabytes; as typed arrays
(``array('d')`` with NaN for "not observed", small integer codes for
categorical fields) it costs tens of megabytes. Requests are checked once,
here, against the rules of ``schemas/observations.schema.json`` (the request
part is checked by :func:`check_request`, a hand-written equivalent of the
schema that is ~50x faster than a generic validator; ``tests/test_gate_schema.py``
keeps the two in agreement) and then folded into the columns.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

from ..util.errors import InputError
from ..util.quantile import quantile
from ..util.schemas import load_schema, validate

NAN = math.nan
#: categorical request fields that default to the run-level value
RUN_DEFAULTED = ("backend", "model", "accelerator", "scheduler")
CATEGORIES = ("backend", "model", "accelerator", "route", "scheduler")
#: numeric columns: latency, time to first token, per-request p95 and mean
#: (``tpot_ms``: given, else the mean of the ``itl_ms`` gaps) of the
#: inter-token gaps, token counts, peak memory pressure and the send time
NUMERIC = (
    "latency_ms",
    "ttft_ms",
    "itl_p95_ms",
    "tpot_ms",
    "tokens_in",
    "tokens_out",
    "memory_pressure",
    "start_ms",
)
_MS_MAX = 1e12
_COUNT_MAX = 1_000_000_000_000
REQUEST_KEYS = frozenset(
    {
        "request_id",
        "backend",
        "model",
        "accelerator",
        "route",
        "scheduler",
        "output_fingerprint",
        "output_values",
        "error",
        "latency_ms",
        "ttft_ms",
        "itl_ms",
        "itl_p95_ms",
        "tokens_in",
        "tokens_out",
        "memory_pressure",
        "streaming",
        "segments",
        "prompt_identity",
        "start_ms",
        "tpot_ms",
    }
)
STREAMING_KEYS = frozenset(
    {
        "timestamps",
        "first_token_ms",
        "gaps_ms",
        "token_count",
        "chunk_count",
        "finish_reason",
        "usage",
        "complete",
    }
)
#: streaming column values
NO_STREAM, INCOMPLETE_STREAM, COMPLETE_STREAM = -1, 0, 1

Fail = Callable[[str, str], InputError]  # (json sub-path, message) -> error to raise


def _number(v: Any) -> bool:
    t = type(v)
    return (t is float or t is int) and v == v


def _ms(v: Any, key: str, fail: Fail) -> float:
    if not _number(v) or v < 0 or v > _MS_MAX:
        raise fail(key, f"expected milliseconds (a number 0..1e12), got {v!r}")
    return float(v)


def _count(v: Any, key: str, fail: Fail) -> float:
    if type(v) is not int or v < 0 or v > _COUNT_MAX:
        raise fail(key, f"expected a count (an integer >= 0), got {v!r}")
    return float(v)


def _fraction(v: Any, key: str, fail: Fail) -> float:
    if not _number(v) or v < 0 or v > 1:
        raise fail(key, f"expected a fraction 0..1, got {v!r}")
    return float(v)


def _ms_list(v: Any, key: str, fail: Fail) -> list[float]:
    if type(v) is not list:
        raise fail(key, f"expected an array of milliseconds, got {type(v).__name__}")
    return [_ms(x, f"{key}[{i}]", fail) for i, x in enumerate(v)]


def _string(v: Any, key: str, fail: Fail) -> str:
    if type(v) is not str:
        raise fail(key, f"expected a string, got {v!r}")
    return v


def check_streaming(s: Any, fail: Fail) -> tuple[int, float, list[float] | None]:
    """Validate streaming evidence; return (column code, first token ms, gaps)."""
    if type(s) is not dict:
        raise fail("streaming", "expected an object with at least 'complete'")
    extra = s.keys() - STREAMING_KEYS
    if extra:
        raise fail("streaming", f"unknown keys {sorted(extra)}; expected some of {sorted(STREAMING_KEYS)}")
    complete = s.get("complete")
    if type(complete) is not bool:
        raise fail("streaming.complete", "is required and must be true or false")
    ts = s.get("timestamps")
    if ts is not None and ts not in ("receive", "server", "none"):
        raise fail("streaming.timestamps", f"expected 'receive', 'server' or 'none', got {ts!r}")
    first = _ms(s["first_token_ms"], "streaming.first_token_ms", fail) if "first_token_ms" in s else NAN
    gaps = _ms_list(s["gaps_ms"], "streaming.gaps_ms", fail) if "gaps_ms" in s else None
    for key in ("token_count", "chunk_count"):
        if key in s:
            _count(s[key], f"streaming.{key}", fail)
    if "finish_reason" in s and s["finish_reason"] is not None:
        _string(s["finish_reason"], "streaming.finish_reason", fail)
    if "usage" in s and type(s["usage"]) is not dict:
        raise fail("streaming.usage", "expected an object")
    return (COMPLETE_STREAM if complete else INCOMPLETE_STREAM), first, gaps


class Category:
    """A categorical column: small integer codes and their values (-1: absent)."""

    __slots__ = ("_lookup", "codes", "values")

    def __init__(self, rows: int = 0) -> None:
        self.codes = array("i", [-1]) * rows
        self.values: list[str] = []
        self._lookup: dict[str, int] = {}

    def code(self, value: str) -> int:
        code = self._lookup.get(value)
        if code is None:
            code = self._lookup[value] = len(self.values)
            self.values.append(value)
        return code

    def value(self, row: int) -> str | None:
        code = self.codes[row]
        return None if code < 0 else self.values[code]


class Side:
    """One deployment's observations: run metadata plus request columns."""

    def __init__(self, label: str, path: str) -> None:
        self.label = label
        self.path = path
        self.run: dict[str, Any] = {}
        self.ids: list[str] = []
        self._index: dict[str, int] | None = None
        #: every id so far is greater than the one before (so unique without an index)
        self._ascending = True
        self.num: dict[str, array[float]] = {key: array("d") for key in NUMERIC}
        self.cats: dict[str, Category] = {key: Category() for key in CATEGORIES}
        self.custom_keys: list[str] = []
        self.fingerprints: list[str | None] = []
        #: what identifies each request's prompt across runs (``prompt_identity``)
        self.prompts: list[str | None] = []
        self.values: list[tuple[float, ...] | None] = []
        self.errors = array("b")
        self.error_messages: dict[int, str] = {}
        self.streaming = array("b")
        self.has_requests = False

    def __len__(self) -> int:
        return len(self.ids)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the id index (built again on first use) and with the
        ids and fingerprints as one string each: a side read in a child process
        comes back pickled, and a million separate strings cost ~0.35 s to
        pickle per list against ~0.07 s joined."""
        state = dict(self.__dict__)
        state["_index"] = None
        state["ids"] = _JoinedStrings.of(self.ids)
        state["fingerprints"] = _JoinedStrings.of(self.fingerprints)
        state["prompts"] = _JoinedStrings.of(self.prompts)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key in ("ids", "fingerprints", "prompts"):
            if isinstance(state[key], _JoinedStrings):
                state[key] = state[key].split()
        self.__dict__.update(state)

    @property
    def index(self) -> dict[str, int]:
        """request_id -> row. Built on first use: observation files are usually
        written in id order, and then neither reading (uniqueness follows from
        the order) nor joining (the ids of both sides are compared as lists)
        needs it; at a million requests it costs ~0.5 s to build."""
        if self._index is None:
            self._index = dict(zip(self.ids, range(len(self.ids))))
        return self._index

    def extend_ids(self, ids: Sequence[str]) -> bool:
        """Append ``ids`` if none repeats (within them or with those present);
        False, and nothing changed, otherwise."""
        if not ids:
            return True
        if self._ascending and ascending(ids) and (not self.ids or self.ids[-1] < ids[0]):
            if self._index is not None:
                self._index.update(zip(ids, range(len(self.ids), len(self.ids) + len(ids))))
            self.ids.extend(ids)
            return True
        index = self.index
        if len(set(ids)) != len(ids) or not index.keys().isdisjoint(ids):
            return False
        index.update(zip(ids, range(len(self.ids), len(self.ids) + len(ids))))
        self._ascending = False
        self.ids.extend(ids)
        return True

    @property
    def aggregates(self) -> dict[str, Any]:
        return self.run.get("aggregates") or {}

    # -- building ---------------------------------------------------------------
    def add(self, d: Any, fail: Fail) -> None:
        """Check one request against the schema's rules and append it."""
        if type(d) is not dict:
            raise fail("", "expected a request object")
        if not d.keys() <= REQUEST_KEYS:
            extra = sorted(d.keys() - REQUEST_KEYS)
            raise fail("", f"unknown keys {extra}; see schemas/observations.schema.json")
        rid = d.get("request_id")
        if type(rid) is not str or not rid:
            raise fail("request_id", "is required and must be a non-empty string")
        row = len(self.ids)
        if self._ascending and row and not self.ids[-1] < rid:
            self._ascending = False
        if self.index.setdefault(rid, row) != row:
            raise fail(
                "request_id",
                f"duplicate request_id {rid!r} (first at requests[{self.index[rid]}]); "
                "ids must be unique per run to be joined",
            )
        for key in CATEGORIES:
            v = d.get(key)
            col = self.cats[key]
            col.codes.append(-1 if v is None and key not in d else col.code(_string(v, key, fail)))
        fp = d.get("output_fingerprint")
        if fp is not None or "output_fingerprint" in d:
            _string(fp, "output_fingerprint", fail)
        self.fingerprints.append(fp)
        pi = d.get("prompt_identity")
        if (pi is not None or "prompt_identity" in d) and not _string(pi, "prompt_identity", fail):
            raise fail("prompt_identity", "expected a non-empty string")
        self.prompts.append(pi)
        ov = d.get("output_values")
        if ov is not None or "output_values" in d:
            if type(ov) is not list or not all(_number(x) for x in ov):
                raise fail("output_values", "expected an array of numbers")
            ov = tuple(float(x) for x in ov)
        self.values.append(ov)
        err = d.get("error")
        if err is not None:
            self.error_messages[row] = _string(err, "error", fail)
        self.errors.append(0 if err is None else 1)
        num = self.num
        v = d.get("latency_ms")
        num["latency_ms"].append(NAN if v is None and "latency_ms" not in d else _ms(v, "latency_ms", fail))
        for key in ("tokens_in", "tokens_out"):
            v = d.get(key)
            num[key].append(NAN if v is None and key not in d else _count(v, key, fail))
        v = d.get("start_ms")
        num["start_ms"].append(NAN if v is None and "start_ms" not in d else _ms(v, "start_ms", fail))
        v = d.get("memory_pressure")
        num["memory_pressure"].append(
            NAN if v is None and "memory_pressure" not in d else _fraction(v, "memory_pressure", fail)
        )
        stream, first, gaps = NO_STREAM, NAN, None
        if "streaming" in d:
            stream, first, gaps = check_streaming(d["streaming"], fail)
        self.streaming.append(stream)
        v = d.get("ttft_ms")
        num["ttft_ms"].append(first if v is None and "ttft_ms" not in d else _ms(v, "ttft_ms", fail))
        if "itl_ms" in d:  # explicit inter-token gaps win over the stream's
            gaps = _ms_list(d["itl_ms"], "itl_ms", fail)
        v = d.get("itl_p95_ms")
        if v is not None or "itl_p95_ms" in d:
            itl = _ms(v, "itl_p95_ms", fail)
        else:
            itl = quantile(sorted(gaps), 0.95) if gaps else NAN
        num["itl_p95_ms"].append(itl)
        v = d.get("tpot_ms")
        if v is not None or "tpot_ms" in d:
            num["tpot_ms"].append(_ms(v, "tpot_ms", fail))
        else:
            num["tpot_ms"].append(sum(gaps) / len(gaps) if gaps else NAN)
        if "segments" in d:
            self._add_segments(d["segments"], row, fail)
        self.ids.append(rid)

    def _add_segments(self, segs: Any, row: int, fail: Fail) -> None:
        if type(segs) is not dict:
            raise fail("segments", "expected an object of segment key -> string value")
        for key in sorted(segs):
            value = _string(segs[key], f"segments.{key}", fail)
            col = self.cats.get(key)
            if col is None:
                if key in NUMERIC:
                    raise fail(f"segments.{key}", "a segment key may not reuse a numeric field name")
                col = self.cats[key] = Category(row + 1)
                self.custom_keys.append(key)
            elif key in CATEGORIES:
                raise fail(f"segments.{key}", f"'{key}' is a request field; set it there, not in segments")
            if len(col.codes) <= row:
                col.codes.extend(array("i", [-1]) * (row + 1 - len(col.codes)))
            col.codes[row] = col.code(value)

    def finish(self) -> None:
        """Pad custom segment columns and apply run-level defaults."""
        rows = len(self.ids)
        for key in self.custom_keys:
            codes = self.cats[key].codes
            if len(codes) < rows:
                codes.extend(array("i", [-1]) * (rows - len(codes)))
        self.custom_keys.sort()
        for key in RUN_DEFAULTED:
            default = self.run.get(key)
            if isinstance(default, str):
                col = self.cats[key]
                missing = col.codes.count(-1)
                if missing:
                    code = col.code(default)
                    if missing == len(col.codes):
                        col.codes = array("i", [code]) * missing
                    else:
                        col.codes = array("i", (code if c < 0 else c for c in col.codes))

    def segment_keys(self) -> list[str]:
        return [*CATEGORIES, *self.custom_keys]


def ascending(ids: Sequence[str]) -> bool:
    """Strictly ascending (so without repeats), in one C-level pass."""
    return all(map(operator.lt, ids, islice(ids, 1, None)))


class _JoinedStrings:
    """A list of strings pickled as one string, cut apart on load.

    The separator (NUL) is accepted only when it occurs exactly between the
    items, never inside one, so the split gives back exactly the list."""

    SEP = "\x00"

    def __init__(self, text: str) -> None:
        self.text = text

    @classmethod
    def of(cls, values: list[Any]) -> Any:
        """The joined form, or ``values`` itself when it cannot be joined
        (empty, holds None, or an item contains the separator)."""
        if not values:
            return values
        try:
            text = cls.SEP.join(values)
        except TypeError:
            return values
        return cls(text) if text.count(cls.SEP) == len(values) - 1 else values

    def split(self) -> list[str]:
        return self.text.split(self.SEP)


RUN_SCHEMA_KEYS = ("version", "kind", "run")


def check_envelope(doc: dict[str, Any], path: Any, prefix: tuple[Any, ...] = ()) -> None:
    """Validate everything but the request list with the JSON Schema itself."""
    schema = load_schema("observations.schema.json")
    envelope = {k: v for k, v in doc.items() if k != "requests"}
    validate(envelope, schema, file=path, prefix=prefix)
    _check_finite(envelope, path, "$" + "".join(f".{p}" for p in prefix))


def _check_finite(value: Any, path: Any, where: str) -> None:
    """JSON Schema bounds pass NaN (every comparison with it is false), and a
    Prometheus scrape may legally hold NaN or +Inf; such a value would only
    fail later, when the report is written. Reject it here, located."""
    if type(value) is float and not math.isfinite(value):
        raise InputError(path, f"{value!r} is not a finite number", json_path=where)
    if type(value) is dict:
        for key, item in value.items():
            _check_finite(item, path, f"{where}.{key}")
    elif type(value) is list:
        for i, item in enumerate(value):
            _check_finite(item, path, f"{where}[{i}]")


def side_from_document(doc: Any, label: str, path: str, prefix: str = "$") -> Side:
    """Build a :class:`Side` from an observations document already in memory
    (what a backend mirror returns)."""
    if not isinstance(doc, dict):
        raise InputError(path, "expected an observations object", json_path=prefix)
    parts = tuple(p for p in prefix.lstrip("$").split(".") if p)
    check_envelope(doc, path, parts)
    side = Side(label, path)
    side.run = doc["run"]
    requests = doc.get("requests")
    if requests is not None and not isinstance(requests, list):
        raise InputError(path, "expected an array", json_path=f"{prefix}.requests")
    for i, item in enumerate(requests or ()):

        def fail(sub: str, msg: str, _i: int = i) -> InputError:
            return InputError(path, msg, json_path=f"{prefix}.requests[{_i}]" + (f".{sub}" if sub else ""))

        side.add(item, fail)
    side.has_requests = bool(side.ids)
    side.finish()
    return side
