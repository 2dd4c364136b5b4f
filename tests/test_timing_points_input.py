"""Timing points are checked before anything is replayed or written (issue 32): NaN, Infinity,
1e400, negative, zero or string measurements, non-positive lengths, a billion requests, a layout
given as a word, a binary or compressed file: each one line naming the file, the line and the JSON
path (schemas/timing-points.schema.json), exit 2, and an existing output left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from tickgate.timing.points import read_points

POINTS = FIXTURES / "realdata" / "measured" / "points.jsonl"
GOOD = {"id": "p", "engine": "vllm", "tp": 1, "workload": {"isl": 128, "osl": 16, "num_requests": 10},
        "measured": {"ttft_ms_mean": 12.5}}


def _line(change: dict[str, object]) -> str:
    doc = json.loads(json.dumps(GOOD))
    for dotted, value in change.items():
        *parents, key = dotted.split(".")
        node = doc
        for p in parents:
            node = node[p]
        node[key] = value
    return json.dumps(doc)


CASES = [
    (_line({"measured.ttft_ms_mean": 1}).replace(": 1}", ": NaN}"), "invalid JSON: NaN is not a JSON number"),
    (_line({"measured.ttft_ms_mean": 1}).replace(": 1}", ": -Infinity}"), "invalid JSON: -Infinity is not a JSON number"),
    (_line({"measured.ttft_ms_mean": 1}).replace(": 1}", ": 1e400}"), "$.measured.ttft_ms_mean: inf is greater than"),
    (_line({"measured.ttft_ms_mean": -3}), "$.measured.ttft_ms_mean: -3 is less than or equal to the minimum of 0"),
    (_line({"measured.ttft_ms_mean": 0}), "$.measured.ttft_ms_mean: 0 is less than or equal to the minimum of 0"),
    (_line({"measured.ttft_ms_mean": "12"}), "$.measured.ttft_ms_mean: '12' is not null or a number"),
    (_line({"workload.isl": 0}), "$.workload.isl: 0 is less than the minimum of 1"),
    (_line({"workload.osl": -8}), "$.workload.osl: -8 is less than the minimum of 1"),
    (_line({"workload.num_requests": 10**9}), "$.workload.num_requests: 1000000000 is greater than the maximum"),
    (_line({"workload.request_rate": -2}), "$.workload.request_rate: -2 is less than or equal to the minimum of 0"),
    (_line({"tp": "four"}), "$.tp: 'four' is not of type 'integer'"),
]


@pytest.mark.parametrize("line,message", CASES, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(CASES)])
def test_a_bad_point_is_one_line_and_nothing_is_written(tmp_path: Path, line: str, message: str) -> None:
    points = tmp_path / "points.jsonl"
    points.write_text(json.dumps(GOOD) + "\n" + line + "\n")
    out = tmp_path / "pred.jsonl"
    out.write_text("earlier predictions\n")
    res = run_cli("timing", "check", str(points), "--output", str(out))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {points}:2:") and message in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert out.read_text() == "earlier predictions\n"


def test_a_compressed_points_file_is_named_as_such(tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "points.jsonl.gz"
    packed.write_bytes(gzip.compress(POINTS.read_bytes()))
    res = run_cli("timing", "check", str(packed), "--output", str(tmp_path / "pred.jsonl"))
    assert res.returncode == 2
    assert res.stderr.strip() == (f"error: {packed}: not UTF-8 text (byte 1): expected JSON lines, "
                                  "not a binary or compressed file")


def test_every_shipped_point_is_valid() -> None:
    assert len(read_points(POINTS)) == sum(1 for line in POINTS.read_text().splitlines() if line.strip())
