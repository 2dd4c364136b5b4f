"""A benchmark client's artifact directory is an input (issue 32): aiperf's and genai-perf's
directories are read through the file in them a backend mirror reads (its ``artifact_files``,
per-request export first), exactly as that file would be."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES, run_cli

AIPERF = FIXTURES / "realdata" / "clients" / "aiperf_0.13"
GENAI = FIXTURES / "realdata" / "clients" / "genai_perf_0.0.16" / "genaiperf_chat_baseline"


def test_gating_two_aiperf_directories_is_gating_their_per_request_exports(tmp_path: Path) -> None:
    base, cand = AIPERF / "aiperf_chat_baseline", AIPERF / "aiperf_chat_candidate_slow"
    by_dir = run_cli("gate", "--baseline", str(base), "--candidate", str(cand), "--output", str(tmp_path / "d.json"))
    by_file = run_cli("gate", "--baseline", str(base / "profile_export.jsonl"), "--candidate",
                      str(cand / "profile_export.jsonl"), "--output", str(tmp_path / "f.json"))
    assert by_dir.returncode == by_file.returncode == 10
    assert (tmp_path / "d.json").read_bytes() == (tmp_path / "f.json").read_bytes()


def test_a_genai_perf_artifacts_directory_is_read_through_its_one_run(tmp_path: Path) -> None:
    (run,) = [p for p in GENAI.iterdir() if p.is_dir()]
    by_dir = run_cli("normalize", str(GENAI), "--output", str(tmp_path / "d.json"))
    by_file = run_cli("normalize", str(run / "profile_export.json"), "--output", str(tmp_path / "f.json"))
    assert by_dir.returncode == by_file.returncode == 0, by_dir.stderr
    assert (tmp_path / "d.json").read_bytes() == (tmp_path / "f.json").read_bytes()


def test_a_directory_that_is_not_one_run_is_one_line_saying_what_to_name(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_cli("normalize", str(empty), "--output", str(tmp_path / "n.json"))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {empty}: is a directory without a file a backend mirror reads (looked for ")
    runs = tmp_path / "runs"
    for name in ("a", "b"):
        shutil.copytree(AIPERF / "aiperf_chat_baseline", runs / name)
    res = run_cli("normalize", str(runs), "--output", str(tmp_path / "n.json"))
    assert res.returncode == 2 and "holds the artifacts of several runs (a, b): name one of them" in res.stderr
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(AIPERF / "aiperf_chat_baseline" / "profile_export.jsonl", mixed)
    shutil.copy(next(GENAI.iterdir()) / "profile_export.json", mixed)
    res = run_cli("normalize", str(mixed), "--output", str(tmp_path / "n.json"))
    assert res.returncode == 2 and "holds files of several formats" in res.stderr
    assert not (tmp_path / "n.json").exists()
