"""JsonStream: msgspec decodes, the standard library words the errors, and
arrays cut into windows give exactly what ``json.loads`` gives."""

from __future__ import annotations

import io
import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate.util import jsonstream
from tickgate.util.errors import InputError
from tickgate.util.jsonstream import JsonStream


def _stream(text: str | bytes) -> JsonStream:
    data = text.encode() if isinstance(text, str) else text
    return JsonStream(io.BytesIO(data), "doc.json")


def _elements(text: str) -> list[object]:
    s = _stream(text)
    out: list[object] = []
    for batch in s.elements("$"):
        out.extend(batch)
    s.at_end()
    return out


def test_msgspec_names_the_byte_after_the_first_it_refuses() -> None:
    """The value's end is read from this message; a msgspec that words or
    counts it differently must fail here, not misplace every value."""
    for text, first_refused in ((b"[1] x", 4), (b"12x", 2), (b'"ab" ,', 5)):
        with pytest.raises(msgspec.DecodeError, match=rf"trailing characters \(byte {first_refused + 1}\)"):
            msgspec.json.decode(text, type=msgspec.Raw)


_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                  st.floats(allow_nan=False, allow_infinity=False),
                  st.text(alphabet=st.sampled_from('ab},{"\\ \u00e9\n'), max_size=6))
_value = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=3), inner, max_size=3)),
                      max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "},{"]), _value, max_size=4), max_size=12),
       st.sampled_from([None, 0, 2]), st.sampled_from([",", ", ", ",\n"]), st.integers(1, 120), st.integers(1, 64))
def test_windows_give_what_json_loads_gives(items, indent, separator, window, chunk) -> None:
    """Objects holding nested objects, arrays of objects and strings with
    ``},{`` in them: cut points inside a value never decode, so whatever the
    window and chunk sizes the elements are json.loads's."""
    text = "[" + separator.join(json.dumps(i, indent=indent) for i in items) + "]"
    saved = jsonstream.WINDOW, jsonstream.CHUNK
    jsonstream.WINDOW, jsonstream.CHUNK = window, chunk
    try:
        got = _elements(text)
    finally:
        jsonstream.WINDOW, jsonstream.CHUNK = saved
    assert repr(got) == repr(json.loads(text))


@pytest.mark.parametrize("literal", ['"\\ud800x"', "1e400", "-1e400", "1" + "0" * 30, '"\\udc00\\ud800"'])
def test_values_msgspec_refuses_are_read_as_json_loads_reads_them(literal: str) -> None:
    text = '[{"v": %s}, {"v": 1}]' % literal
    got = _elements(text)
    want = json.loads(text)
    assert repr(got) == repr(want)


def test_invalid_utf8_is_located() -> None:
    s = _stream(b'[{"v": 1},\n {"v": "\xff"}]')
    with pytest.raises(InputError) as err:
        for _ in s.elements("$"):
            pass
    assert (err.value.line, err.value.column) == (2, 9) and "not UTF-8 text" in err.value.message


@pytest.mark.parametrize("text, line, column, message", [
    ('[{"a": 1},\n {"a": 2,}]', 2, 10, "Expecting property name enclosed in double quotes"),
    ('[{"a": 1},\n {"a": NaN}]', 2, 8, "NaN is not valid JSON"),  # where the NaN is
    ('[{"a": 1}\n {"a": 2}]', 2, 2, "expected ',' or ']' after an element, found '{'"),
    ('[{"a": "\u00e9\u00e9"} x]', 1, 14, "expected ',' or ']' after an element, found 'x'"),
])
def test_errors_name_line_column_and_the_standard_librarys_words(text, line, column, message) -> None:
    with pytest.raises(InputError) as err:
        _elements(text)
    assert (err.value.line, err.value.column) == (line, column) and message in err.value.message, err.value


def test_element_positions_of_a_decoded_window(monkeypatch) -> None:
    monkeypatch.setattr(jsonstream, "WINDOW", 10)
    text = '[{"a": 1},\n  {"b": [{"c": "},{"}]},\n{"\u00e9": 3}, {"d": 4}]'
    s = _stream(text)
    seen = []
    for batch in s.elements("$"):
        seen += [s.element_position(k) for k in range(len(batch))]
    assert seen == [(1, 2), (2, 3), (3, 1), (3, 11)]


@pytest.mark.parametrize("chunk", [1, 2, 1 << 20])
def test_a_byte_order_mark_is_skipped_and_columns_count_after_it(monkeypatch, chunk: int) -> None:
    """Excel and other Windows tools start UTF-8 files with a byte order mark
    (RFC 8259 lets a parser ignore it): read as if absent, whatever the chunk."""
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    assert _elements("\ufeff[1, {\"a\": 2}]") == [1, {"a": 2}]
    with pytest.raises(InputError) as err:
        _elements("\ufeff[1, x]")
    assert (err.value.line, err.value.column) == (1, 5), err.value


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
@pytest.mark.parametrize("window", [8, 1 << 16])
@pytest.mark.parametrize(
    ("text", "line", "column", "json_path"),
    [
        ('[{"a": 1},\n {"b": 1, "b": 2}]', 2, 11, "$[1].b"),
        ('[{"a": 1}, {"b": {"c": [{"d": 1, "e": 1, "d": "x:y"}]}}]', 1, 42, "$[1].b.c[0].d"),
        ('[{"\u00e9": 1, "\u00e9": 2}]', 1, 11, "$[0].\u00e9"),  # columns in characters
        ('[{"k": "\\u003a", "k": 1}]', 1, 18, "$[0].k"),  # an escaped ':' cannot hide it
        ('[{"k": 1e400, "k": 2}]', 1, 15, "$[0].k"),  # a value msgspec refuses: the standard library's path
    ],
)
def test_a_member_given_twice_is_refused_where_it_is(monkeypatch, chunk, window, text, line, column, json_path):
    """Every JSON reader keeps the last of two members of one name; the stream
    refuses the second, located, in a window of elements or one by one."""
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    monkeypatch.setattr(jsonstream, "WINDOW", window)
    with pytest.raises(InputError) as err:
        _elements(text)
    name = json_path.rsplit(".", 1)[1]
    assert err.value.message == f"duplicate member {name!r}", err.value
    assert (err.value.line, err.value.column, err.value.json_path) == (line, column, json_path), err.value


def test_a_member_given_twice_in_a_member_value_is_refused() -> None:
    s = _stream('{"run": {"label": "a", "label": "b"}, "requests": []}')
    with pytest.raises(InputError) as err:
        for name in s.members("$"):
            s.skip(f"$.{name}")
    assert (err.value.line, err.value.column, err.value.json_path) == (1, 24, "$.run.label"), err.value
