"""Sweeps and plans check what they read before anything runs or is written (issue 32).

- Resuming into a sweep directory whose entries were replaced by something of another kind (a
  file where ``points/`` or a point's folder belongs, a directory or a named pipe where a
  report, a hash or a policy belongs) was an internal error halfway through (exit 3) or a hang;
  now it is one line naming the entry, exit 2, before any replay, and nothing in the directory
  changes. A hash or report file that is garbage is not reused: the point replays.
- A request every replay would refuse (``prompt_tokens: 0``: an input length of 0) made every
  sweep point fail and ``plan`` rewrite an existing PLAN.json with failed runs and exit 1; now
  the workload is read once first and the error is one located line, exit 2, nothing written.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, POLICIES, run_cli

from tickgate import testing

GRID = "grid:\n  scheduler.options.kv_pages: [20, 40]\n"


def _sweep(folder: Path, workload: str = "workload.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(POLICIES / "default.yaml", folder / "base.yaml")
    shutil.copy(FIXTURES / "workload.json", folder / "workload.json")
    path = folder / "sweep.yaml"
    path.write_text(f"version: 1\npolicy: base.yaml\nworkloads:\n  - {workload}\n{GRID}", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("resume")
    sweep = _sweep(root / "in")
    out = root / "out"
    res = run_cli("sweep", str(sweep), "--output", str(out))
    assert res.returncode == 0, res.stderr
    return sweep, out


def _snapshot(folder: Path) -> dict[str, tuple[str, bytes | None]]:
    found: dict[str, tuple[str, bytes | None]] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            found[str(path.relative_to(folder))] = ("other", None)
        elif path.is_dir():
            found[str(path.relative_to(folder))] = ("dir", None)
        else:
            found[str(path.relative_to(folder))] = ("file", path.read_bytes())
    return found


def _as_file(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    path.write_text("not a folder\n")


def _as_dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _as_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


KINDS = [
    ("points", _as_file, "it is a regular file where a directory (one folder per point) belongs"),
    ("points/p0001", _as_file, "it is a regular file where a directory (point p0001's files) belongs"),
    ("points/p0000/report.json", _as_dir, "it is a directory where a regular file (the point's report) belongs"),
    ("points/p0000/inputs.sha256", _as_dir,
     "it is a directory where a regular file (the hash of the point's inputs) belongs"),
    ("points/p0001/policy.json", _as_dir, "it is a directory where a regular file (the point's policy) belongs"),
    ("points/p0000/report.json", _as_fifo, "it is a named pipe where a regular file (the point's report) belongs"),
    ("points/p0001/inputs.sha256", _as_fifo,
     "it is a named pipe where a regular file (the hash of the point's inputs) belongs"),
]


@pytest.mark.parametrize("entry,replace,message", KINDS,
                         ids=[f"{e}-{r.__name__.removeprefix('_as_')}" for e, r, _ in KINDS])
def test_resuming_into_an_entry_of_the_wrong_kind_names_it(swept: tuple[Path, Path], tmp_path: Path, entry: str,
                                                           replace: object, message: str) -> None:
    sweep, done = swept
    out = tmp_path / "out"
    shutil.copytree(done, out)
    replace(out / entry)  # type: ignore[operator]
    before = _snapshot(out)
    res = testing.run_cli("sweep", str(sweep), "--output", str(out), timeout=120)  # a named pipe hung
    assert res.returncode == 2, res.stderr
    assert res.stderr == (f"error: {out / entry}: cannot resume the sweep: {message}; "
                          "move it away or give another --output\n")
    assert _snapshot(out) == before


@pytest.mark.parametrize("name", ["results.jsonl", "index.html"])
def test_an_output_that_is_a_directory_is_refused_before_any_replay(swept: tuple[Path, Path], tmp_path: Path,
                                                                    name: str) -> None:
    sweep, done = swept
    out = tmp_path / "out"
    shutil.copytree(done, out)
    shutil.rmtree(out / "points" / "p0000")  # would replay: it must not
    _as_dir(out / name)
    res = run_cli("sweep", str(sweep), "--output", str(out))
    assert res.returncode == 2 and res.stderr == f"error: {out / name}: cannot write: it is a directory\n"
    assert not (out / "points" / "p0000").exists()


@pytest.mark.parametrize("name,content", [
    ("inputs.sha256", b"\xff\xfe not text"),
    ("report.json", b"[" * 100_000),
    ("report.json", b'{"summary": 3}'),
])
def test_a_garbage_hash_or_report_is_replayed_not_a_crash(swept: tuple[Path, Path], tmp_path: Path, name: str,
                                                          content: bytes) -> None:
    sweep, done = swept
    out = tmp_path / "out"
    shutil.copytree(done, out)
    (out / "points" / "p0000" / name).write_bytes(content)
    res = run_cli("sweep", str(sweep), "--output", str(out))
    assert res.returncode == 0, res.stderr
    assert "1 replayed, 1 reused, 0 failed" in res.stdout
    assert (out / "results.jsonl").read_bytes() == (done / "results.jsonl").read_bytes()


def _bad_workload(folder: Path) -> Path:
    data = json.loads((FIXTURES / "workload.json").read_text(encoding="utf-8"))
    data["requests"][2]["prompt_tokens"] = 0
    path = folder / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_request_every_point_would_refuse_stops_the_sweep_before_it_starts(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path / "in", workload="bad.json")
    bad = _bad_workload(tmp_path / "in")
    out = tmp_path / "out"
    res = run_cli("sweep", str(sweep), "--output", str(out))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {bad}:1:")
    assert "$.requests[2].prompt_tokens: 0 is less than the minimum of 1" in res.stderr
    assert not out.exists()


def test_plan_leaves_plan_json_alone_for_a_workload_it_refuses(tmp_path: Path) -> None:
    bad = _bad_workload(tmp_path)
    out = tmp_path / "PLAN.json"
    out.write_text('{"earlier": "plan"}\n')
    res = run_cli("plan", "--workload", str(bad), "--policy", str(POLICIES / "vllm-v1-bench.yaml"),
                  "--slo", "ttft_p99_ms=2000", "--vary", "scheduler.options.max_num_seqs=1..8",
                  "--output", str(out))
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {bad}:1:") and len(res.stderr.splitlines()) == 1
    assert "$.requests[2].prompt_tokens: 0 is less than the minimum of 1" in res.stderr
    assert out.read_text() == '{"earlier": "plan"}\n'
