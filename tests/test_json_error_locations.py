"""Every JSON parse error names file:line:column (issue 32): a NaN or Infinity
that strict JSON refuses is located where it is, not at the start of the value
or the file, in every reader (the replay-report reader said only ``r.json:
invalid JSON: NaN is not valid JSON``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli
from tickgate.readers.replay_report import ReplayReportMirror
from tickgate.timing.points import read_points
from tickgate.util.errors import InputError
from tickgate.util.locations import load_json


def _report(tmp_path: Path) -> Path:
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--output", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    return out


def _at(path: Path, err: InputError, token: str) -> None:
    assert err.line is not None and err.column is not None, err
    line = path.read_text().splitlines()[err.line - 1]
    assert line[err.column - 1 :].startswith(token), (err, line)


def test_a_nan_in_a_replay_report_is_located(tmp_path: Path) -> None:
    report = _report(tmp_path)
    text = report.read_text().replace('"completed_requests": 4', '"completed_requests": NaN', 1)
    report.write_text(text)
    with pytest.raises(InputError) as err:
        load_json(report)
    _at(report, err.value, "NaN")
    assert err.value.json_path == "$.summary.completed_requests"
    assert err.value.message == "invalid JSON: NaN is not valid JSON"
    with pytest.raises(InputError) as err:
        ReplayReportMirror().read(report)
    _at(report, err.value, "NaN")
    res = run_cli("gate", "--baseline", str(report), "--candidate", str(report), "--output", str(tmp_path / "g.json"))
    assert res.returncode == 2
    line = text[: text.index("NaN")].count("\n") + 1
    assert f"r.json:{line}:" in res.stderr and "$.summary.completed_requests: invalid JSON: NaN" in res.stderr


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_nan_in_timing_points_is_located(tmp_path: Path, constant: str) -> None:
    lines = (FIXTURES / "realdata" / "measured" / "points.jsonl").read_text().splitlines(keepends=True)[:3]
    point = json.loads(lines[2])
    key, value = next((k, v) for k, v in point["measured"].items() if isinstance(v, (int, float)))
    lines[2] = lines[2].replace(f'"{key}": {json.dumps(value)}', f'"{key}": {constant}', 1)
    path = tmp_path / "points.jsonl"
    path.write_text("".join(lines))
    with pytest.raises(InputError) as err:
        read_points(path)
    assert err.value.line == 3 and err.value.json_path == f"$.measured.{key}", err.value
    _at(path, err.value, constant)
