"""The helper processes share one Helper (tickgate.parallel): a child's errors arrive
as they were raised, and nothing outlives the Helper (process or fd)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from conftest import children
from tickgate.errors import InputError, PluginError, TickgateError
from tickgate.parallel import helper as helper_module
from tickgate.parallel.helper import Channel, Helper

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="helpers need fork")


def _fds() -> list[str]:
    return sorted(os.listdir("/proc/self/fd"))


def test_the_gate_follows_the_switch_and_its_own_threshold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tickgate.parallel import switch
    from tickgate.parallel.gate_sides import worth_it

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
        with pytest.raises(TickgateError, match=r"^the process doing a test \(pid \d+\) was killed by signal 9; "
                                                r"TICKGATE_PARALLEL=0 does it here instead$"):
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
