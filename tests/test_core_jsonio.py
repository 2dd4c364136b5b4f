"""orjson writes exactly what json.dumps writes, for the values tickgate lets it write; jsonio.loads reads what json.loads reads."""

from __future__ import annotations

import json
import math
from json.decoder import scanstring

import msgspec
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tickgate.util.jsonio import (
    JsonProblem,
    dumps_line,
    find_problem,
    loads,
    location,
    plain_float,
    split_error,
    stdlib_line,
    unique_members,
)

floats = st.floats(allow_nan=True, allow_infinity=True)
plain = floats.filter(plain_float)
texts = st.text() | st.text(alphabet=st.characters(max_codepoint=0x7F))
values = st.recursive(
    st.none() | st.booleans() | st.integers() | plain | texts,
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)


def dumps(value):
    return json.dumps(value, separators=(",", ":"))


@settings(max_examples=500, deadline=None)
@given(values)
@example({"id": "é\x7f\u2028", "x": [1.0, 0.0001, 9999999999999998.0, -0.0, 2**64, -(2**70)]})
def test_same_text_as_json_dumps(value):
    assert dumps_line(value) == dumps(value)
    assert stdlib_line(value) == dumps(value)


@settings(max_examples=2000, deadline=None)
@given(floats)
@example(1e16)
@example(1.2345678901234568e+17)
@example(1e-4)
@example(9.999999999999999e-05)
@example(1e-05)
def test_plain_float_is_exactly_where_msgspec_agrees(x):
    same = orjson.dumps(x).decode() == json.dumps(x)
    if plain_float(x):
        assert same
    assert not (math.isnan(x) or math.isinf(x)) or not plain_float(x)


def test_values_outside_the_range_differ_so_callers_check():
    assert orjson.dumps(1e-05) != json.dumps(1e-05).encode()
    assert orjson.dumps(math.nan) != json.dumps(math.nan).encode()
    assert not plain_float(1e-05) and not plain_float(math.nan) and not plain_float(math.inf)


def test_errors_are_those_of_json_dumps():
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        dumps_line({"a": {1}})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_line(loop)


def test_location_counts_characters_from_a_byte_offset():
    data = "ab\nçd\n{x".encode()
    assert location(data, 0) == (1, 1)
    assert location(data, data.index(b"d")) == (2, 2)  # ç is two bytes, one column
    assert location(data, len(data)) == (3, 3)
    try:
        msgspec.json.decode(b'{"a": 1,}')
    except msgspec.DecodeError as exc:
        assert split_error(exc) == ("trailing comma in object", 8)


any_floats = st.recursive(
    st.none() | st.booleans() | st.integers() | floats | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(any_floats, st.sampled_from([None, 1]))
@example(float("nan"), None)
@example([1e308 * 10, -1e308 * 10], None)
def test_loads_reads_what_json_loads_reads(value, indent) -> None:
    """Any json.dumps text (NaN and Infinity included, which msgspec refuses)
    decodes to json.loads's value, bit for bit (repr tells -0.0 and NaN apart)."""
    text = json.dumps(value, indent=indent)
    assert repr(loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", ['{"a": 1,}', '[1e400]', '"\\ud800"', "\ufeff{}",
                                  "[" * 100_000, '{"a" 1}', "1" + "0" * 5000])
def test_loads_fails_and_succeeds_exactly_as_json_loads(text: str) -> None:
    try:
        want: object = repr(json.loads(text))
    except (ValueError, RecursionError) as exc:
        want = (type(exc), str(exc))
    try:
        got: object = repr(loads(text))
    except (ValueError, RecursionError) as exc:
        got = (type(exc), str(exc))
    assert got == want


def _pairs_unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise KeyError("duplicate")
    return dict(pairs)


def _has_duplicate(text: str) -> bool:
    try:
        json.loads(text, object_pairs_hook=_pairs_unique)
    except KeyError:
        return True
    return False


names = st.sampled_from(["a", "b", "a:b", ":", "\u00e9", "k"])
objects = st.recursive(
    st.none() | st.integers() | floats | st.sampled_from(["x", "x:y", "::", "\\u003a"]),
    lambda children: st.lists(children, max_size=4)
    | st.lists(st.tuples(names, children), max_size=4).map(lambda pairs: ("object", pairs)),
    max_leaves=16,
)


def _text(value: object) -> str:
    """JSON text of ``value``, where ("object", pairs) is an object that may name a member twice."""
    if isinstance(value, tuple):
        return "{" + ", ".join(f"{json.dumps(k)}: {_text(v)}" for k, v in value[1]) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_text(v) for v in value) + "]"
    if isinstance(value, str) and value.startswith("\\"):
        return f'"{value}"'  # an escaped ':' in the text
    return json.dumps(value)


@settings(max_examples=1500, deadline=None)
@given(objects)
@example(("object", [("a", "x:y"), ("a", 1)]))
@example(("object", [("k", "\\u003a"), ("k", 1)]))  # one ':' more decoded than written
@example([("object", [("a", 1)]), ("object", [("b", "x:y"), ("b", "::")])])
def test_loads_refuses_exactly_the_texts_that_name_a_member_twice(value: object) -> None:
    """Whatever the counts prove or fail to prove, a duplicate is found and a
    text without one reads as json.loads reads it."""
    text = _text(value)
    if _has_duplicate(text):
        with pytest.raises(JsonProblem) as err:
            loads(text)
        assert err.value.msg.startswith("duplicate member ")
        name = scanstring(text, err.value.pos + 1)[0]  # the error points at the second name
        assert err.value.msg == f"duplicate member {name!r}"
        with pytest.raises(JsonProblem):
            loads(text.encode())
    else:
        assert repr(loads(text)) == repr(json.loads(text))
        assert find_problem(text) is None


def test_a_proof_by_counting_never_passes_a_duplicate() -> None:
    """The counts may fail to prove (then the text is walked), never prove wrongly."""
    assert unique_members(b'[{"a": "x:y", "b": 1}]', [{"a": "x:y", "b": 1}])
    assert not unique_members(b'{"a": 1, "a": 2}', {"a": 2})
    assert not unique_members(b'{"a": "x:y", "a": "z"}', {"a": "z"})
    assert not unique_members(b'{"a": "\\u003a", "a": "x:"}', {"a": "x:"})  # an escaped ':'


@pytest.mark.parametrize(
    ("text", "line", "column", "json_path", "message"),
    [
        ('{"a": 1,\n "a": 2}', 2, 2, "$.a", "duplicate member 'a'"),
        ('[{"run": {"x": [1, {"y": 1, "y": 1}]}}]', 1, 29, "$[0].run.x[1].y", "duplicate member 'y'"),
        ('{"a": [1, NaN]}', 1, 11, "$.a[1]", "invalid JSON: NaN is not valid JSON"),
        ('{"a": -Infinity}', 1, 7, "$.a", "invalid JSON: -Infinity is not valid JSON"),
    ],
)
def test_problems_are_located_by_line_column_and_json_path(text, line, column, json_path, message) -> None:
    from tickgate.util.locations import _strict_loads

    with pytest.raises(JsonProblem) as err:
        loads(text, _strict_loads)
    assert (err.value.lineno, err.value.colno, err.value.json_path, err.value.msg) == (
        line, column, json_path, message
    )
