"""Column-at-a-time ingestion of a batch of request dicts.

:meth:`Side.add` checks one request field by field: exact, located errors,
~10 us per request. For a million requests that alone would take ten seconds,
so batches first go through :func:`add_batch`, which checks each field for
the whole batch with C-level operations (type sets, min/max) and appends
whole columns. It accepts a batch only when every request is certainly valid
and simple (no streaming, itl_ms, output_values or segments); otherwise it
changes nothing and returns False, and the caller runs the exact per-request
path, which either ingests the batch identically or raises the located error.
"""

from __future__ import annotations

from itertools import repeat
from typing import Any

from .observations import CATEGORIES, NAN, NO_STREAM, REQUEST_KEYS, Side

_SLOW_KEYS = frozenset({"streaming", "itl_ms", "output_values", "segments"})
_FAST_KEYS = REQUEST_KEYS - _SLOW_KEYS
_NONE = type(None)
#: column -> (allowed types, maximum)
_NUMERIC = {
    "latency_ms": ({int, float}, 1e12), "ttft_ms": ({int, float}, 1e12), "itl_p95_ms": ({int, float}, 1e12),
    "tokens_in": ({int}, 1_000_000_000_000), "tokens_out": ({int}, 1_000_000_000_000),
    "memory_pressure": ({int, float}, 1.0),
}
_ORDER = ("request_id", *CATEGORIES, "output_fingerprint", "error", *_NUMERIC)


def add_batch(side: Side, batch: list[Any]) -> bool:
    """Append ``batch`` if it is certainly valid; False (and no change) otherwise.

    Columns are read with ``map(dict.get, batch, repeat(key))`` (a C loop).
    ``get`` cannot tell an explicit null from an absent key, so the batch's key count
    is compared with its non-null values (only ``error`` may be null).
    """
    if set(map(type, batch)) != {dict} or not all(map(_FAST_KEYS.issuperset, batch)):
        return False
    present = set().union(*batch)
    absent = [None] * len(batch)
    columns = {key: list(map(dict.get, batch, repeat(key))) if key in present else absent for key in _ORDER}
    errors = columns["error"]
    error_nulls = sum(map(dict.__contains__, batch, repeat("error"))) - (len(errors) - errors.count(None))
    non_null = sum(len(col) - col.count(None) for col in columns.values())
    if sum(map(len, batch)) != non_null + error_nulls:
        return False  # an explicit null where the schema wants a value
    ids = columns["request_id"]
    if set(map(type, ids)) != {str} or "" in ids:
        return False
    if len(set(ids)) != len(ids) or not side.index.keys().isdisjoint(ids):
        return False
    for key in (*CATEGORIES, "output_fingerprint", "error"):
        if not set(map(type, columns[key])) <= {str, _NONE}:
            return False
    for key, (types, top) in _NUMERIC.items():
        col = columns[key]
        present = [v for v in col if v is not None] if None in col else col
        if present:
            if not set(map(type, present)) <= types:
                return False  # bool, strings, ...
            if min(present) < 0 or max(present) > top:
                return False
    # certainly valid: append every column
    row = len(side.ids)
    side.index.update(zip(ids, range(row, row + len(ids))))
    side.ids.extend(ids)
    for key in CATEGORIES:
        cat = side.cats[key]
        col = columns[key]
        for value in dict.fromkeys(col):  # first-seen order, as the exact path assigns codes
            if value is not None:
                cat.code(value)
        lookup = {**cat._lookup, None: -1}
        cat.codes.extend(map(lookup.__getitem__, col))
    side.fingerprints.extend(columns["output_fingerprint"])
    side.values.extend([None] * len(batch))
    if errors.count(None) == len(errors):
        side.errors.frombytes(bytes(len(errors)))
    else:
        side.errors.extend([e is not None for e in errors])
        for i, e in enumerate(errors):
            if e is not None:
                side.error_messages[row + i] = e
    side.streaming.extend([NO_STREAM] * len(batch))
    nan = NAN
    for key in _NUMERIC:
        col = columns[key]
        side.num[key].extend([nan if v is None else v for v in col] if None in col else col)
    return True
