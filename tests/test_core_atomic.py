"""Output files: the row layout is exact JSON, and a failed write leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate.atomic import atomic_writer, dumps_rows, write_json

values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(values)
def test_row_layout_round_trips(value: object) -> None:
    assert json.loads(dumps_rows(value)) == value


def test_rows_are_one_per_line() -> None:
    text = dumps_rows({"summary": {"a": 1}, "ticks": [{"tick": 0}, {"tick": 1}]})
    assert text.splitlines() == ["{", '  "summary": {', '    "a": 1', "  },", '  "ticks": [',
                                 '    {"tick": 0},', '    {"tick": 1}', "  ]", "}"]


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    write_json(out, {"old": True})
    with pytest.raises(ValueError):
        write_json(out, {"bad": float("nan")})
    with pytest.raises(RuntimeError):
        with atomic_writer(out) as fh:
            fh.write("half")
            raise RuntimeError("interrupted")
    assert json.loads(out.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
