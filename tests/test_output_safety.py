"""Outputs cannot hurt (issue 32): an output that is not a regular file is never
replaced by one (a character device is written through, a named pipe or a block
device refused before any work), an output never names an input, and SIGTERM
removes an output in progress as Ctrl-C does."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, POLICIES, REPO, run_cli

POINTS = FIXTURES / "realdata" / "measured" / "points.jsonl"


def _device(tmp_path: Path, name: str, minor: int) -> Path:
    """A character device node of the memory driver (major 1) in ``tmp_path``: 3 is
    /dev/null's, 7 /dev/full's. A private node, so that a regression replaces it
    and not the machine's own."""
    path = tmp_path / name
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    except OSError as exc:  # no permission, or a file system without device nodes
        pytest.skip(f"cannot make a device node here: {exc}")
    return path


def _is_char_device(path: Path) -> bool:
    return stat.S_ISCHR(os.stat(path).st_mode)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_a_character_device_is_written_through_not_replaced(tmp_path: Path) -> None:
    null = _device(tmp_path, "null", 3)
    res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--output", str(null),
                  "--trace", str(null), "--quiet")
    assert res.returncode == 0, res.stderr
    assert _is_char_device(null), "the device node was replaced by a file"
    assert _leftovers(tmp_path) == []


def test_a_device_that_refuses_the_write_is_one_line_naming_it(tmp_path: Path) -> None:
    full = _device(tmp_path, "full", 7)
    res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--output", str(full), "--quiet")
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: {full}: could not write: No space left on device"
    assert _is_char_device(full)


@pytest.mark.parametrize("option", ["--output", "--trace"])
def test_a_named_pipe_is_refused_before_any_work(tmp_path: Path, option: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    other = "--trace" if option == "--output" else "--output"
    args = ["replay", "--input", str(FIXTURES / "workload.json"), option, str(fifo),
            other, str(tmp_path / "other.json"), "--quiet"]
    res = run_cli(*args)  # never opened for writing: a refusal, not a hang
    assert res.returncode == 2
    assert "it is a named pipe; tickgate writes regular files" in res.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert not (tmp_path / "other.json").exists(), "nothing is written before the outputs are checked"


@pytest.mark.parametrize(
    "args",
    [
        ["timing", "check", "{points}", "--output", "{points}"],
        ["timing", "fit", "{points}", "--base", str(FIXTURES / "timing" / "missing.yaml"), "--output", "{points}"],
        ["normalize", "{points}", "--output", "{points}"],
        ["import", "mooncake", "{trace}", "--output", "{trace}"],
    ],
    ids=["timing-check", "timing-fit", "normalize", "import"],
)
def test_an_output_never_names_an_input(tmp_path: Path, args: list[str]) -> None:
    points = tmp_path / "points.jsonl"
    points.write_bytes(POINTS.read_bytes())
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes((FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl").read_bytes())
    before = {p: p.read_bytes() for p in (points, trace)}
    res = run_cli(*[a.format(points=points, trace=trace) for a in args])
    assert res.returncode == 2, res.stderr
    assert "name the same file; it would be overwritten" in res.stderr
    assert {p: p.read_bytes() for p in (points, trace)} == before


@pytest.mark.parametrize("parallel", ["0", "1"], ids=["one-process", "with-helpers"])
def test_sigterm_removes_the_output_in_progress(tmp_path: Path, parallel: str) -> None:
    workload = tmp_path / "w.json"
    made = run_cli("generate", "--requests", "60000", "--input-len", "64:512", "--output-len", "64:512",
                   "--rate", "50", "--seed", "3", "--output", str(workload))
    assert made.returncode == 0, made.stderr
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "TICKGATE_PARALLEL": parallel}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tickgate", "replay", "--input", str(workload), "--policy",
         str(POLICIES / "vllm-v1-bench.yaml"), "--output", str(out / "r.json"), "--trace", str(out / "t.jsonl"),
         "--quiet"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while not _leftovers(out) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail(f"the replay ended before its trace was begun: {proc.returncode} {proc.stderr.read()}")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "terminated"
    assert sorted(p.name for p in out.iterdir()) == [], "temporary files were left behind"
