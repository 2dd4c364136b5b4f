"""Importing a large trace in two processes (tickgate.importers.import_parts) writes exactly
what one process writes, and fails exactly where one process fails."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import FIXTURES

from tickgate.importers import import_parts
from tickgate.commands.cli import main
from tickgate.importers.mooncake import MooncakeReader

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="reading in parts needs fork")

MOONCAKE = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"


def _import(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, parallel: str, trace: Path,
            out: Path, *extra: str) -> tuple[int, str, str]:
    monkeypatch.setenv("TICKGATE_PARALLEL", parallel)
    code = main(["import", "mooncake", str(trace), "--output", str(out), *extra])
    stdout, err = capsys.readouterr()
    return code, stdout, err


def _both(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, trace: Path, tmp_path: Path,
          *extra: str) -> tuple[tuple[int, str, str, bytes | None], tuple[int, str, str, bytes | None]]:
    """The import in one process and in two: (exit code, stdout, stderr, output bytes) each."""
    results = []
    for parallel in ("0", "1"):
        out = tmp_path / f"w{parallel}.json"
        out.write_bytes(b"before")
        code, stdout, err = _import(capsys, monkeypatch, parallel, trace, out, *extra)
        results.append((code, stdout.replace(str(out), "OUT"), err, out.read_bytes()))
    return results[0], results[1]


def _row(ts: float, prompt: int = 40, output: int = 5, ids: list[int] | None = None, **more: Any) -> str:
    row = {"timestamp": ts, "input_length": prompt, "output_length": output,
           "hash_ids": ids if ids is not None else list(range(int(ts) * 10, int(ts) * 10 + -(-prompt // 16))),
           **more}
    return json.dumps(row)


def _trace(path: Path, lines: list[str], newline: str = "\n") -> Path:
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    return path


def test_the_real_trace_is_the_same_in_two_processes(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    one, two = _both(capsys, monkeypatch, MOONCAKE, tmp_path)
    assert one == two and one[0] == 0
    assert "imported 12031 requests" in one[1]
    assert import_parts.split(MOONCAKE) is not None  # it was really cut


def test_skipped_rows_on_both_sides_of_the_cut_are_counted_once(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    # 30 skipped rows spread over the whole file: the header keeps the first 20 lines, in order
    lines = [_row(i, output=0 if i % 7 == 3 else 5) for i in range(210)]
    trace = _trace(tmp_path / "t.jsonl", lines)
    one, two = _both(capsys, monkeypatch, trace, tmp_path, "--block-size", "16")
    assert one == two and one[0] == 0
    head = json.loads(one[3].decode().splitlines()[0] + "]}")
    skipped = head["source"]["skipped"]["zero output_length"]
    assert skipped["count"] == 30 and skipped["first_lines"] == [i + 1 for i in range(210) if i % 7 == 3][:20]
    assert head["source"]["rows"] == 210 and head["source"]["requests"] == 180


@pytest.mark.parametrize("newline", ["\r\n", "\n"])
def test_line_numbers_after_the_cut_match_with_blank_lines_and_crlf(capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path, newline: str) -> None:
    lines = []
    for i in range(120):
        lines.append(_row(i * 2.5))
        if i % 9 == 0:
            lines += ["", "   "]
    lines[-1] = '{"timestamp": 1e9, "input_length": 40}'  # an error on the last line: its number must match
    trace = _trace(tmp_path / "t.jsonl", lines, newline)
    one, two = _both(capsys, monkeypatch, trace, tmp_path, "--block-size", "16")
    assert one == two
    assert one[0] == 2 and f"{trace}:{len(lines)}: output_length: expected a whole number" in one[2]
    assert one[3] == two[3] == b"before"  # nothing written


def test_an_unsorted_row_right_after_the_cut_is_the_same_error(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    lines = [_row(i) for i in range(400)]
    trace = _trace(tmp_path / "t.jsonl", lines)
    parts = import_parts.split(trace)
    assert parts is not None
    cut = parts[1].first_line  # the first line the child reads
    lines[cut - 1] = _row(1.5)  # earlier than its predecessor, and than the first half's last row
    trace = _trace(trace, lines)
    assert import_parts.split(trace) == parts
    one, two = _both(capsys, monkeypatch, trace, tmp_path, "--block-size", "16")
    assert one == two
    assert f"{trace}:{cut}: timestamp 1.5 is earlier than the row on line {cut - 1}" in one[2]
    # the same row also malformed after its timestamp: the order is checked first, in both
    lines[cut - 1] = _row(1.5, output=-1)
    _trace(trace, lines)
    assert _both(capsys, monkeypatch, trace, tmp_path, "--block-size", "16")[1][2] == one[2]


def test_errors_in_both_halves_report_the_first(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lines = [_row(i) for i in range(400)]
    lines[350] = "{not json"
    trace = _trace(tmp_path / "t.jsonl", lines)
    one, two = _both(capsys, monkeypatch, trace, tmp_path, "--block-size", "16")
    assert one == two and f"{trace}:351:2: invalid JSON" in one[2]
    lines[20] = _row(20, ids=[1, -2, 3])
    _trace(trace, lines)
    one, two = _both(capsys, monkeypatch, trace, tmp_path, "--block-size", "16")
    assert one == two and f"{trace}:21: hash_ids: expected non-negative integer block ids" in one[2]


def test_bad_bytes_in_the_second_half(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                      tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.jsonl", [_row(i) for i in range(400)])
    trace.write_bytes(trace.read_bytes() + b'{"timestamp": 500, "x": "\xff\xfe"}\n')
    one, two = _both(capsys, monkeypatch, trace, tmp_path, "--block-size", "16")
    assert one == two and one[0] == 2 and "not UTF-8 text" in one[2]


def test_a_broken_first_row_is_reported_by_the_first_half(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lines = [_row(i) for i in range(400)]
    lines[0] = '{"timestamp": "soon"}'  # the child has no time origin: its half must not matter
    trace = _trace(tmp_path / "t.jsonl", lines)
    one, two = _both(capsys, monkeypatch, trace, tmp_path, "--block-size", "16")
    assert one == two and f'{trace}:1: timestamp: expected milliseconds >= 0, found "soon"' in one[2]


def test_blank_files_and_files_that_cannot_be_cut(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n" * 5000)
    one, two = _both(capsys, monkeypatch, blank, tmp_path)
    assert one == two and f"{blank}:1: empty file" in one[2]
    single = _trace(tmp_path / "one.jsonl", [_row(3)])
    assert import_parts.split(single) is None
    one, two = _both(capsys, monkeypatch, single, tmp_path, "--block-size", "16")
    assert one == two and one[0] == 0
    cr = tmp_path / "cr.jsonl"  # lone carriage returns end lines too, but cannot be cut at (no b"\n")
    cr.write_bytes(("\r".join(_row(i) for i in range(50)) + "\r").encode())
    assert import_parts.split(cr) is None
    one, two = _both(capsys, monkeypatch, cr, tmp_path, "--block-size", "16")
    assert one == two and one[0] == 0 and "imported 50 requests" in one[1]


def test_limit_reads_in_one_process(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                    tmp_path: Path) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("--limit must not read in parts")

    monkeypatch.setattr(import_parts, "read_in_parts", refuse)
    code, _, _ = _import(capsys, monkeypatch, "1", MOONCAKE, tmp_path / "w.json", "--limit", "10")
    assert code == 0


@pytest.mark.parametrize("seed", range(6))
def test_lines_before_the_cut_are_counted_as_text_files_count_them(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   seed: int) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(import_parts, "_CHUNK", rng.choice([1, 2, 3, 7, 64]))  # "\r\n" across chunks
    text = "".join(rng.choice(["ab", "c", "", "\n", "\r\n", "\r", "é"]) for _ in range(rng.randint(40, 400)))
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode())
    parts = import_parts.split(path)
    data = path.read_bytes()
    if parts is None:  # no line ends past the middle, before the last byte
        assert b"\n" not in data[len(data) // 2:-1]
        return
    first, second = parts
    assert data[second.start - 1:second.start] == b"\n"
    with path.open(encoding="utf-8", newline="") as fh:
        lines = fh.readlines()
    assert len("".join(lines[:first.stop_line - 1]).encode()) == second.start
    assert second.first_line == first.stop_line


def test_a_second_half_that_dies_is_a_clear_error(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = MooncakeReader.read_part

    def dying(self: MooncakeReader, path: Path, options: Any, part: Any) -> Iterator[Any]:
        if part.start:
            os._exit(3)
        return real(self, path, options, part)

    monkeypatch.setattr(MooncakeReader, "read_part", dying)
    out = tmp_path / "w.json"
    code, _, err = _import(capsys, monkeypatch, "1", MOONCAKE, out)
    assert code == 2 and "the process reading the second half" in err and "exited with status 3" in err
    assert "TICKGATE_PARALLEL=0" in err and not out.exists()
