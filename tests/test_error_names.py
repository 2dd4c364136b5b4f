"""Every error names the user's file (issue 32): never a made-up ``<input>``.
A fleet given an untimed workload said ``<input>: a fleet replays arrivals in
ms``; an error that no file caused (two options that exclude each other) now
says what is wrong without a file in front."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES, POLICIES, run_cli
from tickgate.util.errors import InputError


def test_a_fleet_names_the_untimed_workload(tmp_path: Path) -> None:
    workload = FIXTURES / "workload.json"  # arrival_tick, no arrival_ms
    res = run_cli("replay", "--input", str(workload), "--policy", str(POLICIES / "fleet-round-robin.yaml"),
                  "--output", str(tmp_path / "r.json"))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {workload}: a fleet replays arrivals in ms"), res.stderr
    assert "<input>" not in res.stderr and not (tmp_path / "r.json").exists()


def test_an_error_no_file_caused_names_none() -> None:
    assert str(InputError(None, "give --input BUNDLE, or both --baseline and --candidate")) == (
        "give --input BUNDLE, or both --baseline and --candidate"
    )
    assert str(InputError(None, "bad", json_path="$.x")) == "$.x: bad"
    assert str(InputError("w.json", "bad", line=3, column=4)) == "w.json:3:4: bad"


def test_the_gate_without_inputs_names_no_file(tmp_path: Path) -> None:
    res = run_cli("gate", "--output", str(tmp_path / "g.json"))
    assert res.returncode == 2 and res.stderr == "error: give --input BUNDLE, or both --baseline and --candidate\n"
