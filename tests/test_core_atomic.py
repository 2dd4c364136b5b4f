"""Output files: the row layout is exact JSON, and a failed write leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickgate.util.atomic import atomic_writer, dumps_rows, write_json

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


def test_a_new_file_gets_the_umask_mode_and_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    import os
    import stat

    old = os.umask(0o027)
    try:
        import tickgate.util.atomic as atomic

        atomic._UMASK = None  # read it again under this test's umask
        out = tmp_path / "new.json"
        write_json(out, {"a": 1})
        assert stat.S_IMODE(out.stat().st_mode) == 0o640
        kept = tmp_path / "kept.json"
        kept.write_text("{}")
        kept.chmod(0o604)
        write_json(kept, {"a": 2})
        assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and json.loads(kept.read_text()) == {"a": 2}
    finally:
        os.umask(old)
        atomic._UMASK = None


@pytest.mark.parametrize("args, message", [
    (["--output", "{d}"], "{d}: cannot write: it is a directory"),
    (["--output", "{f}/x/r.json"], "{f}/x/r.json: cannot write: {f} is not a directory"),
    (["--output", "{t}/same.json", "--trace", "{t}/same.json"],
     "--trace and --output name the same file; one would replace the other"),
    (["--output", "{w}"], "--output and --input name the same file; it would be overwritten"),
    (["--output", "{t}/r.json", "--block-size", "16"], "--block-size applies to trace formats"),
])
def test_replay_refuses_bad_output_paths_before_any_work(tmp_path: Path, args: list[str], message: str) -> None:
    from conftest import FIXTURES, run_cli

    d = tmp_path / "adir"
    d.mkdir()
    f = tmp_path / "afile"
    f.write_text("keep")
    w = tmp_path / "w.json"
    w.write_text((FIXTURES / "workload.json").read_text())
    fmt = {"d": d, "f": f, "t": tmp_path, "w": w}
    res = run_cli("replay", "--input", str(w), *[a.format(**fmt) for a in args])
    assert res.returncode == 2
    assert message.format(**fmt) in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert f.read_text() == "keep" and w.read_text() == (FIXTURES / "workload.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile", "w.json"]


def test_gate_refuses_an_output_over_its_input(tmp_path: Path) -> None:
    from conftest import FIXTURES, run_cli

    bundle = tmp_path / "b.json"
    bundle.write_text((FIXTURES / "release_gate_safe.json").read_text())
    res = run_cli("gate", "--input", str(bundle), "--output", str(bundle))
    assert res.returncode == 2 and "--output and --input name the same file" in res.stderr
    assert bundle.read_text() == (FIXTURES / "release_gate_safe.json").read_text()
