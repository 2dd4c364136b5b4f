"""Reading a workload ahead in a forked child (tickgate.workload.prefetch) changes nothing:
the same requests, the same errors at the same request, the same reports."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import POLICIES, children, run_cli
from tickgate.util.errors import InputError, TickgateError
from tickgate.interfaces.model import Request
from tickgate.workload.prefetch import BATCH, prefetched
from tickgate.parallel.switch import helpers_wanted
from tickgate.workload.format import WorkloadHeader, read_workload, write_workload

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="prefetch needs fork")


def _requests(n: int) -> list[Request]:
    out = []
    for i in range(n):
        out.append(Request(
            id=f"req-{i}", prompt_tokens=200 + i % 300, max_output_tokens=1 + i % 17, priority=i % 3 - 1,
            arrival_ms=float(i * 7) + 0.25, tenant=f"t{i % 4}" if i % 5 else None,
            lane="fast" if i % 7 == 0 else None, deadline_ms=float(i * 7 + 900) if i % 2 else None,
            strict_deadline=i % 11 == 0,
            prefix_blocks=tuple(range(i, i + 2 + i % 4)) + (3, 9) if i % 3 == 0 else None,
            prompt_token_ids=tuple(range(i % 50, i % 50 + 40)) if i % 3 == 1 else None,
        ))
    return out


def _write(path: Path, requests: list[Request]) -> Path:
    with path.open("w") as fh:
        write_workload(fh, WorkloadHeader(block_size=16), requests)
    return path


def test_same_requests_in_the_same_order(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.json", _requests(3 * BATCH + 5))
    assert list(prefetched(read_workload(path).requests)) == list(read_workload(path).requests) == _requests(3 * BATCH + 5)


def test_an_error_arrives_after_the_requests_before_it(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.json", _requests(BATCH + 40))
    lines = path.read_text().splitlines()
    bad = BATCH + 21  # request index of the broken line (line 1 is the header)
    lines[bad + 1] = lines[bad + 1].replace('"prompt_tokens":', '"prompt_tokens":-', 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as direct:
        list(read_workload(path).requests)
    got = []
    with pytest.raises(InputError) as ahead:
        for r in prefetched(read_workload(path).requests):
            got.append(r)
    assert len(got) == bad
    assert str(ahead.value) == str(direct.value)
    assert f"w.json:{bad + 2}:1: $.requests[{bad}].prompt_tokens" in str(ahead.value)
    assert not children()


def test_stopping_early_ends_the_child(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.json", _requests(20 * BATCH))
    stream = prefetched(read_workload(path).requests)
    assert next(stream).id == "req-0"
    assert len(children()) == 1
    stream.close()
    assert not children()


def test_a_stream_never_read_starts_no_child(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.json", _requests(10))
    prefetched(read_workload(path).requests)
    assert not children()


def _replay(tmp_path: Path, workload: Path, setting: str, name: str):
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "TICKGATE_PARALLEL": setting}
    res = run_cli("replay", "--input", str(workload), "--policy", str(POLICIES / "vllm-v1-bench.yaml"),
                  "--output", str(out), env=env)
    return res, out


def test_cli_reports_and_errors_are_identical_with_and_without(tmp_path: Path) -> None:
    workload = _write(tmp_path / "w.json", [
        Request(id=r.id, prompt_tokens=r.prompt_tokens, max_output_tokens=r.max_output_tokens,
                arrival_ms=r.arrival_ms, tenant=r.tenant, prefix_blocks=r.prefix_blocks,
                prompt_token_ids=r.prompt_token_ids) for r in _requests(2 * BATCH + 3)])
    (res_on, out_on), (res_off, out_off) = (_replay(tmp_path, workload, "1", "on"),
                                            _replay(tmp_path, workload, "0", "off"))
    assert res_on.returncode == res_off.returncode == 0, res_on.stderr + res_off.stderr
    assert out_on.read_bytes() == out_off.read_bytes()
    assert json.loads(out_on.read_text())["summary"]["request_count"] == 2 * BATCH + 3

    lines = workload.read_text().splitlines()
    lines[BATCH + 9] = lines[BATCH + 9].replace('"max_output_tokens":', '"max_output_tokens":-', 1)
    workload.write_text("\n".join(lines) + "\n")
    (res_on, out_on), (res_off, out_off) = (_replay(tmp_path, workload, "1", "bad-on"),
                                            _replay(tmp_path, workload, "0", "bad-off"))
    assert res_on.returncode == res_off.returncode == 2
    assert res_on.stderr == res_off.stderr and f"$.requests[{BATCH + 8}]" in res_on.stderr
    assert not out_on.exists() and not out_off.exists()


def test_a_child_that_dies_is_a_clear_error(tmp_path: Path) -> None:
    import signal

    path = _write(tmp_path / "w.json", _requests(40 * BATCH))
    stream = prefetched(read_workload(path).requests)
    assert next(stream).id == "req-0"
    (child,) = children()
    os.kill(child, signal.SIGKILL)
    with pytest.raises(TickgateError, match=r"was killed by signal 9 before the end of the workload; "
                                            r"TICKGATE_PARALLEL=0 reads it in this process instead"):
        for _ in stream:  # what it sent before it died still arrives
            pass
    assert not children()


@pytest.mark.parametrize("setting,big,expected", [
    ("0", True, False), ("off", True, False), ("false", True, False),
    ("1", False, True), ("yes", False, True), ("", False, False),
])
def test_the_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, big: bool, expected: bool) -> None:
    import tickgate.parallel.switch as switch

    path = tmp_path / "w.json"
    path.write_text("{}")
    monkeypatch.setenv("TICKGATE_PARALLEL", setting)
    monkeypatch.setattr(switch, "MIN_BYTES", 1 if big else 1 << 40)
    monkeypatch.setattr(switch, "cores", lambda: 2)
    assert helpers_wanted(path) is expected


def test_a_bug_in_the_reader_is_an_internal_error_after_the_requests_before_it() -> None:
    def stream():
        yield from _requests(3)
        raise ValueError("boom")

    got = []
    with pytest.raises(RuntimeError, match="reading the workload in a child process failed: ValueError: boom"):
        for r in prefetched(stream()):
            got.append(r)
    assert got == _requests(3)
    assert not children()
