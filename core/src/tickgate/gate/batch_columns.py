"""Column-at-a-time ingestion of a batch of request dicts.

:meth:`Side.add` checks one request field by field: exact, located errors,
~10 us per request. For a million requests that alone would take ten seconds,
so batches first go through :func:`add_batch`, which checks each field for
the whole batch with C-level operations (type sets, min/max) and appends
whole columns. It accepts a batch only when every request is certainly valid
and simple (no streaming, itl_ms, output_values or segments); otherwise it
changes nothing and returns False, and the caller runs the exact per-request
path, which either ingests the batch identically or raises the located error.

Columns are cut out of the batch in one of two ways. Requests written by one
program share one shape (the same keys): then one ``itemgetter`` call per
request and one ``zip`` cut every column at once (:func:`_uniform_columns`).
Otherwise each key is looked up in every request (:func:`_mixed_columns`).
Numbers enter the typed arrays through ``struct`` and category codes as joined
bytes: ``array.extend`` from Python objects parses each item on its own and
was the costliest step at a million requests.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, cast

from .observations import CATEGORIES, NAN, REQUEST_KEYS, Category, Side

_SLOW_KEYS = frozenset({"streaming", "itl_ms", "output_values", "segments"})
_FAST_KEYS = REQUEST_KEYS - _SLOW_KEYS
_NONE = type(None)
_NUMBER = frozenset({int, float})
#: column -> (allowed types, maximum)
_NUMERIC = {
    "latency_ms": (_NUMBER, 1e12),
    "ttft_ms": (_NUMBER, 1e12),
    "itl_p95_ms": (_NUMBER, 1e12),
    "tokens_in": (frozenset({int}), 1_000_000_000_000),
    "tokens_out": (frozenset({int}), 1_000_000_000_000),
    "memory_pressure": (_NUMBER, 1.0),
    "start_ms": (_NUMBER, 1e12),
    "tpot_ms": (_NUMBER, 1e12),
}
_ORDER = ("request_id", *CATEGORIES, "output_fingerprint", "prompt_identity", "error", *_NUMERIC)
#: category code -1 (absent) as stored in an array('i')
_ABSENT_CODE = struct.pack("i", -1)
_NAN_DOUBLE = struct.pack("d", NAN)

#: key -> the batch's values (None: no request carries the key)
Columns = dict[str, Sequence[Any] | None]
#: a category column as array('i') bytes, and the values it adds to the category
_Codes = tuple[bytes, list[str]]


def add_batch(side: Side, batch: list[Any]) -> bool:
    """Append ``batch`` if it is certainly valid; False (and no change) otherwise."""
    if not batch:
        return True
    columns = _uniform_columns(batch)
    if columns is not None:
        nullable = False
    else:
        columns = _mixed_columns(batch)
        if columns is None:
            return False
        nullable = True
    codes = {key: _codes(side.cats[key], columns[key], len(batch), nullable) for key in CATEGORIES}
    if None in codes.values() or not _valid(columns, nullable):
        return False
    numbers = {key: _numbers(columns[key], len(batch), nullable, *limits) for key, limits in _NUMERIC.items()}
    if None in numbers.values():
        return False
    ids = columns["request_id"]
    assert ids is not None  # _valid checked it
    if not side.extend_ids(ids):
        return False  # a repeated id: the exact path names both places
    # no None among the codes and numbers (checked above)
    _append(side, columns, cast("dict[str, _Codes]", codes), cast("dict[str, bytes]", numbers), len(batch))
    return True


def _uniform_columns(batch: list[Any]) -> Columns | None:
    """Columns of a batch whose requests all have exactly the first one's keys.

    ``itemgetter`` raises for a missing key (KeyError) and for anything but a
    dict (TypeError); with every key found, an equal key count proves there is
    no other key. Values may still be null here (see :func:`_valid`).
    """
    first = batch[0]
    if type(first) is not dict or "request_id" not in first or len(first) < 2:
        return None
    keys = tuple(first)
    if not _FAST_KEYS.issuperset(keys):
        return None
    try:
        rows = list(map(itemgetter(*keys), batch))
    except (KeyError, TypeError):
        return None
    if set(map(len, batch)) != {len(keys)}:
        return None
    columns: Columns = dict.fromkeys(_ORDER)
    columns.update(zip(keys, zip(*rows)))
    return columns


def _mixed_columns(batch: list[Any]) -> Columns | None:
    """Columns of a batch of dicts with differing keys (None: absent or null).

    Columns are read with ``map(dict.get, batch, repeat(key))`` (a C loop).
    ``get`` cannot tell an explicit null from an absent key, so the batch's key count
    is compared with its non-null values (only ``error`` may be null).
    """
    if set(map(type, batch)) != {dict}:
        return None
    present = set().union(*batch)
    if not present <= _FAST_KEYS:
        return None
    columns: Columns = {
        key: list(map(dict.get, batch, repeat(key))) if key in present else None for key in _ORDER
    }
    non_null = 0
    for col in columns.values():
        if col is not None:
            non_null += len(col) - col.count(None)
    errors = columns["error"]
    error_nulls = 0
    if errors is not None:
        stated = sum(map(dict.__contains__, batch, repeat("error")))
        error_nulls = stated - (len(errors) - errors.count(None))
    if sum(map(len, batch)) != non_null + error_nulls:
        return None  # an explicit null where the schema wants a value
    return columns


def _valid(columns: Columns, nullable: bool) -> bool:
    """Every string column holds strings (categories are checked by
    :func:`_codes`, numbers by :func:`_numbers`). ``nullable``: None stands for
    an absent value (else only ``error`` may be None). ``str.join`` doubles as a
    C-speed check that every item is a string."""
    ids = columns["request_id"]
    if ids is None or not _strings(ids) or "" in ids:
        return False
    for key in ("output_fingerprint", "prompt_identity"):
        strings = columns[key]
        if strings is not None and not (
            set(map(type, strings)) <= {str, _NONE} if nullable else _strings(strings)
        ):
            return False
    prompts = columns["prompt_identity"]
    if prompts is not None and "" in prompts:
        return False
    errors = columns["error"]
    return not (
        errors is not None
        and errors.count(None) != len(errors)
        and not set(map(type, errors)) <= {str, _NONE}
    )


def _numbers(
    col: Sequence[Any] | None, n: int, nullable: bool, types: frozenset[type], top: float
) -> bytes | None:
    """A numeric column checked (type, 0..top) and packed as array('d')
    bytes, NaN where absent; None when a value does not fit."""
    if col is None:
        return _NAN_DOUBLE * n
    kinds = set(map(type, col))
    present = col
    if _NONE in kinds:
        if not nullable:
            return None
        kinds.discard(_NONE)
        present = [v for v in col if v is not None]
        col = [NAN if v is None else v for v in col]
    if not kinds <= types:
        return None  # bool, strings, ...
    if present and (min(present) < 0 or max(present) > top):
        return None
    return struct.pack(f"{n}d", *col)


def _strings(values: Sequence[Any]) -> bool:
    try:
        "".join(values)
    except TypeError:
        return False
    return True


def _codes(cat: Category, col: Sequence[Any] | None, n: int, nullable: bool) -> _Codes | None:
    """The column's category codes as array('i') bytes and the values new to
    the category (coded in first-seen order, exactly as the per-request path
    assigns them, once the batch is accepted); None when a value is not a
    string (or is null where nulls are not allowed). Nothing is changed here."""
    if col is None:
        return _ABSENT_CODE * n, []
    table: dict[Any, bytes] = {value: struct.pack("i", code) for value, code in cat._lookup.items()}
    if nullable:
        table[None] = _ABSENT_CODE
    try:
        return b"".join(map(table.__getitem__, col)), []
    except (KeyError, TypeError):  # a new value, or an unhashable one
        pass
    new: list[str] = []
    try:
        for value in dict.fromkeys(col):
            if value not in table:
                if type(value) is not str:
                    return None
                table[value] = struct.pack("i", len(cat.values) + len(new))
                new.append(value)
    except TypeError:  # unhashable: a list or an object
        return None
    return b"".join(map(table.__getitem__, col)), new


def _append(
    side: Side, columns: Columns, codes: dict[str, _Codes], numbers: dict[str, bytes], n: int
) -> None:
    """Append checked columns (ids already appended by ``side.extend_ids``)."""
    row = len(side.fingerprints)
    for key in CATEGORIES:
        cat = side.cats[key]
        data, new = codes[key]
        for value in new:
            cat.code(value)
        cat.codes.frombytes(data)
    fingerprints = columns["output_fingerprint"]
    side.fingerprints.extend(repeat(None, n) if fingerprints is None else fingerprints)
    prompts = columns["prompt_identity"]
    side.prompts.extend(repeat(None, n) if prompts is None else prompts)
    side.values.extend(repeat(None, n))
    errors = columns["error"]
    if errors is None or errors.count(None) == n:
        side.errors.frombytes(bytes(n))
    else:
        side.errors.extend([e is not None for e in errors])
        for i, e in enumerate(errors):
            if e is not None:
                side.error_messages[row + i] = e
    side.streaming.frombytes(b"\xff" * n)  # NO_STREAM (-1) for every request
    for key, packed in numbers.items():
        side.num[key].frombytes(packed)
