"""Inputs stream through pipes (issue 32): a FIFO and ``<(...)`` (process
substitution, ``/dev/fd/N``) are read once, front to back, by the process that
reads them, never reopened, sized or cut in two; a reader that must look at a
file twice (format detection, then the reader) holds a pipe in memory. Every
test has a timeout: a hang fails it instead of blocking the suite."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, POLICIES, REPO
from tickgate.gate.inputs import load_observations, read_side
from tickgate.util.errors import InputError
from tickgate.workload.sources import open_requests

TIMEOUT = 60
WORKLOAD = FIXTURES / "workload.json"
TRACES = FIXTURES / "realdata" / "traces"
CLIENTS = FIXTURES / "realdata" / "clients"
VLLM = CLIENTS / "vllm_bench_serve_0.33" / "vllm_openai_baseline.json"


def through_fifo(tmp_path: Path, data: bytes, read: Callable[[Path], Any]) -> Any:
    """``read(fifo)`` while a thread writes ``data`` into the FIFO once; fails
    (rather than blocks) if reading does not finish within ``TIMEOUT`` seconds."""
    fifo = tmp_path / f"fifo-{len(list(tmp_path.iterdir()))}"
    os.mkfifo(fifo)

    def write() -> None:
        try:
            with open(fifo, "wb") as fh:  # blocks until the reader opens it
                fh.write(data)
        except BrokenPipeError:
            pass  # the reader stopped early (an error): its error is the test's

    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = read(fifo)
        except BaseException as exc:  # handed to the test
            out["error"] = exc

    writer = threading.Thread(target=write, daemon=True)
    reader = threading.Thread(target=run, daemon=True)
    writer.start()
    reader.start()
    reader.join(TIMEOUT)
    if reader.is_alive():
        pytest.fail(f"reading a FIFO hangs (more than {TIMEOUT} s)")
    writer.join(TIMEOUT)
    if "error" in out:
        raise out["error"]
    return out["value"]


def requests(path: Path, fmt: str = "workload") -> list[Any]:
    stream, _ = open_requests(path, fmt)
    return list(stream)


def test_a_workload_streams_through_a_fifo(tmp_path: Path) -> None:
    assert through_fifo(tmp_path, WORKLOAD.read_bytes(), requests) == requests(WORKLOAD)


def test_a_sorted_keys_workload_streams_through_a_fifo(tmp_path: Path) -> None:
    """``json.dump(sort_keys=True)`` puts version (and source) after the requests:
    read once, they are taken after the requests."""
    doc = json.loads(WORKLOAD.read_text())
    doc["source"] = {"tool": "test"}
    text = json.dumps(doc, sort_keys=True).encode()
    assert text.index(b'"version"') > text.index(b'"requests"')
    assert through_fifo(tmp_path, text, requests) == requests(WORKLOAD)
    bad = json.dumps({**doc, "version": 2}, sort_keys=True).encode()
    with pytest.raises(InputError, match=r"\$\.version"):
        through_fifo(tmp_path, bad, requests)


def test_a_header_member_after_the_requests_of_a_pipe_is_an_error(tmp_path: Path) -> None:
    """It would have changed the replay, and came too late to: said, not ignored."""
    doc = json.loads(WORKLOAD.read_text())
    text = json.dumps({"version": 1, "requests": doc["requests"], "block_size": 16}).encode()
    with pytest.raises(InputError) as err:
        through_fifo(tmp_path, text, requests)
    assert err.value.json_path == "$.block_size" and "after the requests" in err.value.message
    assert err.value.line == 1 and err.value.column is not None


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("mooncake_conversation_trace.jsonl", "mooncake"), ("AzureLLMInferenceTrace_code.csv", "azure")],
)
def test_a_trace_streams_through_a_fifo(tmp_path: Path, name: str, fmt: str) -> None:
    plain = tmp_path / name
    plain.write_bytes(b"".join((TRACES / name).read_bytes().splitlines(keepends=True)[:300]))
    assert through_fifo(tmp_path, plain.read_bytes(), lambda p: requests(p, fmt)) == requests(plain, fmt)


def test_gate_inputs_are_detected_and_read_through_a_fifo(tmp_path: Path) -> None:
    """Detection reads the head, then the reader reads the file: a pipe is held in
    memory once, and the result names the pipe, not the in-memory copy."""
    doc = through_fifo(tmp_path, VLLM.read_bytes(), load_observations)
    assert doc["requests"] == load_observations(VLLM)["requests"]
    assert doc["run"]["provenance"]["file"].startswith(str(tmp_path / "fifo-"))
    neutral = tmp_path / "neutral.json"
    neutral.write_text(json.dumps(doc))
    side = through_fifo(tmp_path, neutral.read_bytes(), lambda p: read_side(p, "b"))
    assert side.ids == read_side(neutral, "b").ids and side.path.startswith(str(tmp_path / "fifo-"))
    native = through_fifo(tmp_path, VLLM.read_bytes(), lambda p: read_side(p, "b"))
    assert native.ids == side.ids and native.path.startswith(str(tmp_path / "fifo-"))
    broken = VLLM.read_bytes().replace(b'"completed": 200', b'"completed": 200, "completed": 1', 1)
    with pytest.raises(InputError) as err:
        through_fifo(tmp_path, broken, load_observations)
    assert err.value.path is not None and err.value.path.startswith(str(tmp_path / "fifo-"))
    assert "duplicate member 'completed'" in err.value.message


def _shell(command: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``command`` in bash (process substitution), ``tickgate`` being this interpreter."""
    tickgate = f"{shlex.quote(sys.executable)} -m tickgate"
    return subprocess.run(
        ["bash", "-c", command.replace("tickgate ", tickgate + " ", 1)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        timeout=TIMEOUT * 2,
    )


def _report(path: Path) -> dict[str, Any]:
    report = json.loads(path.read_text())
    report["inputs"].pop("workload")
    return report


@pytest.mark.parametrize("parallel", ["0", "1"])  # 1: the workload read ahead in a forked child
def test_replay_takes_process_substitution(tmp_path: Path, parallel: str) -> None:
    piped, plain = tmp_path / "piped.json", tmp_path / "plain.json"
    res = _shell(
        f"tickgate replay --input <(cat {WORKLOAD}) --output {piped} --quiet", tmp_path, TICKGATE_PARALLEL=parallel
    )
    assert res.returncode == 0, res.stderr
    res = _shell(f"tickgate replay --input {WORKLOAD} --output {plain} --quiet", tmp_path)
    assert res.returncode == 0, res.stderr
    assert _report(piped) == _report(plain)


def test_import_takes_process_substitution_even_with_helpers_forced(tmp_path: Path) -> None:
    """A pipe cannot be cut in two for two processes: one reads it."""
    trace = TRACES / "mooncake_conversation_trace.jsonl"
    out = tmp_path / "w.json"
    res = _shell(
        f"tickgate import mooncake <(head -200 {trace}) --output {out} --quiet", tmp_path, TICKGATE_PARALLEL="1"
    )
    assert res.returncode == 0, res.stderr
    assert len(json.loads(out.read_text())["requests"]) == 200


def test_gate_takes_process_substitution(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    res = _shell(
        f"tickgate gate --baseline <(cat {VLLM}) --candidate <(cat {VLLM}) --output {out} "
        f"--policy {POLICIES / 'gate-default.yaml'} --quiet",
        tmp_path,
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["decision"] == "promote"
