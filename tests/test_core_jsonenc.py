"""The reusable C encoder writes exactly what json.dumps writes."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate.jsonenc import chunk_encoder

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([(",", ":"), (", ", ": ")]), st.booleans())
def test_same_text_as_json_dumps(value, separators, ensure_ascii):
    encode = chunk_encoder(separators=separators, ensure_ascii=ensure_ascii, allow_nan=False)
    expected = json.dumps(value, separators=separators, ensure_ascii=ensure_ascii, allow_nan=False)
    assert "".join(encode(value, 0)) == expected
    assert "".join(encode(value, 0)) == expected  # reusable: no state left behind


def test_errors_are_those_of_json_dumps():
    def strict():
        return chunk_encoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False)

    with pytest.raises(ValueError, match="Out of range float"):
        strict()([math.nan], 0)
    with pytest.raises(TypeError, match="Object of type set is not JSON serializable"):
        strict()({"a": {1}}, 0)
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        strict()(loop, 0)
    lenient = chunk_encoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    assert "".join(lenient([math.inf], 0)) == json.dumps([math.inf], separators=(",", ":"))
