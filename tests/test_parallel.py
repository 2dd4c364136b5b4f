"""The helper processes share one switch and one Helper (tickgate.parallel): every fork
of the four goes through it, ``TICKGATE_PARALLEL=0`` turns them all off, a child's
errors arrive as they were raised, and nothing outlives the Helper (process or fd)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES, POLICIES, REPO, children
from tickgate.util.errors import InputError, PluginError, TickgateError
from tickgate.parallel import helper as helper_module
from tickgate.parallel.helper import Channel, Helper

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="helpers need fork")

MOONCAKE = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"


def _fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def _commands(tmp_path: Path) -> list[list[str]]:
    bundle = json.loads((FIXTURES / "release_gate_safe.json").read_text())
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    base.write_text(json.dumps(bundle["baseline"]))
    cand.write_text(json.dumps(bundle["candidate"]))
    return [
        ["replay", "--input", str(FIXTURES / "workload.json"), "--output", str(tmp_path / "r.json"),
         "--quiet"],
        ["import", "mooncake", str(MOONCAKE), "--output", str(tmp_path / "w.json"), "--quiet"],
        ["gate", "--baseline", str(base), "--candidate", str(cand), "--output", str(tmp_path / "g.json")],
    ]


@pytest.mark.parametrize("setting", ["1", "0"])
def test_every_helper_forks_through_the_one_helper_and_the_switch_turns_all_off(
        setting: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from tickgate.commands.cli import main

    forks: list[int] = []
    roles: list[str] = []
    real_fork, real_start = os.fork, Helper.start

    def counted_fork() -> int:
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    def counted_start(self: Helper) -> Helper:
        roles.append(self.role)
        return real_start(self)

    monkeypatch.setattr(os, "fork", counted_fork)
    monkeypatch.setattr(Helper, "start", counted_start)
    monkeypatch.setenv("TICKGATE_PARALLEL", setting)
    monkeypatch.chdir(REPO)
    for argv in _commands(tmp_path):
        assert main(argv) == 0, capsys.readouterr().err
    if setting == "0":
        assert forks == roles == []
    else:
        assert len(forks) == len(roles)  # no fork but a Helper's
        assert [r.split(" /")[0] for r in roles] == [
            "computing the fingerprint and summary", "reading the workload ahead",
            "reading the second half of", "reading"]
    assert not children()


def test_the_gate_follows_the_switch_and_its_own_threshold(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from tickgate.parallel import switch
    from tickgate.gate.sides import worth_it

    small, big = tmp_path / "small.json", tmp_path / "big.json"
    small.write_bytes(b"x" * 10)
    big.write_bytes(b"x" * 100)
    monkeypatch.setattr(switch, "cores", lambda: 2)
    monkeypatch.setattr(switch, "SIDES_MIN_BYTES", 50)
    monkeypatch.setattr(switch, "MIN_BYTES", 5)
    monkeypatch.delenv("TICKGATE_PARALLEL", raising=False)
    assert switch.helpers_wanted(small) and not worth_it(small, big) and worth_it(big, big)
    monkeypatch.setattr(switch, "cores", lambda: 1)
    assert not worth_it(big, big)
    monkeypatch.setenv("TICKGATE_PARALLEL", "1")
    assert worth_it(small, small)
    monkeypatch.setenv("TICKGATE_PARALLEL", "0")
    monkeypatch.setattr(switch, "cores", lambda: 2)
    assert not worth_it(big, big) and not switch.helpers_wanted(big)


def _helper(body: Any, **more: Any) -> Helper:
    return Helper(body, role="doing a test", instead="does it here instead", doing="testing", **more)


def _fail_with(exc: Exception) -> Any:
    def body(channel: Channel) -> None:
        channel.send(1)
        raise exc
    return body


@pytest.mark.parametrize("exc", [
    InputError("w.json", "bad value", line=3, column=7, json_path="$.requests[1].x"),
    PluginError('scheduler "x" from dist 1.0 failed: ValueError: no'),
    TickgateError("a plain user-facing error"),
])
def test_a_childs_error_is_raised_in_the_parent_as_it_was(exc: Exception) -> None:
    before = _fds()
    with _helper(_fail_with(exc)) as helper:
        assert helper.receive() == 1
        with pytest.raises(type(exc)) as raised:
            helper.result()
    assert type(raised.value) is type(exc) and str(raised.value) == str(exc)
    if isinstance(exc, InputError):
        assert (raised.value.path, raised.value.line, raised.value.column, raised.value.json_path) == (
            exc.path, exc.line, exc.column, exc.json_path)
    assert not children() and _fds() == before


def test_a_bug_in_the_child_is_an_internal_error_naming_the_work() -> None:
    with _helper(_fail_with(KeyError("k"))) as helper:
        with pytest.raises(RuntimeError, match=r"^testing in a child process failed: KeyError: 'k'$"):
            list(helper)
    assert not children()


class _Odd(tuple):  # marshal refuses subclasses: the frame is pickled
    pass


def test_values_both_ways_and_what_marshal_refuses() -> None:
    def body(channel: Channel) -> list[Any]:
        return [value for value in channel]

    before = _fds()
    sent = [1, "two", (3.0, None), _Odd((4,)), b"x" * (3 << 20)]  # the last one more than a pipe holds
    with _helper(body, to_child=True) as helper:
        for value in sent:
            helper.send(value)
        helper.done_sending()
        got = helper.result()
    assert got == sent and type(got[3]) is _Odd
    assert not children() and _fds() == before


def test_a_child_that_dies_names_itself_and_the_switch() -> None:
    def body(channel: Channel) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with _helper(body) as helper:
        with pytest.raises(TickgateError, match=r"^the process doing a test \(pid \d+\) was killed by "
                                                r"signal 9; TICKGATE_PARALLEL=0 does it here instead$"):
            helper.result()
    assert not children()


def test_leaving_early_stops_a_child_blocked_on_a_full_pipe() -> None:
    def body(channel: Channel) -> None:
        while True:
            channel.send(b"x" * 65536)

    before = _fds()
    with pytest.raises(ZeroDivisionError):
        with _helper(body) as helper:
            assert len(helper.receive()) == 65536
            1 / 0
    assert not children() and _fds() == before and not helper_module._held


def test_ctrl_c_leaves_no_helper_behind(tmp_path: Path) -> None:
    """A terminal's Ctrl-C signals the whole process group: the helpers die, the
    replay says "aborted", exit 130, and no process of the group is left."""
    from tickgate.interfaces.model import Request
    from tickgate.workload.format import WorkloadHeader, write_workload

    workload = tmp_path / "w.json"
    with workload.open("w") as fh:
        write_workload(fh, WorkloadHeader(block_size=16), (
            Request(id=f"r{i}", prompt_tokens=300 + i % 700, max_output_tokens=50 + i % 200,
                    arrival_ms=i * 2.0) for i in range(60_000)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tickgate", "replay", "--input", str(workload), "--policy",
         str(POLICIES / "vllm-v1-bench.yaml"), "--output", str(tmp_path / "r.json")],
        env={**os.environ, "TICKGATE_PARALLEL": "1"}, cwd=REPO, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(600):  # both helpers forked (at most a minute)
            if len(_children_of(proc.pid)) == 2 or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert len(_children_of(proc.pid)) == 2, "the replay did not fork its two helpers"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # pragma: no cover - only when the test fails
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (proc.returncode, err) == (130, "\naborted\n")  # click's word for a KeyboardInterrupt
    assert _group_is_gone(proc.pid) and not (tmp_path / "r.json").exists()


def _children_of(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _group_is_gone(pgid: int, within: float = 10.0) -> bool:
    """No process (zombies included) is left in process group ``pgid`` within ``within`` seconds.

    The helpers got the same SIGINT and exit on their own; once the replay has exited they are
    init's children until reaped, which on a loaded machine takes a moment: the group must be gone
    soon, not at the very instant the replay returned (checking that raced and failed under load)."""
    deadline = time.monotonic() + within
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
