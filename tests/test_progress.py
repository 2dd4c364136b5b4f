"""Progress on stderr for long replays, imports and gates: only on a terminal.

With stderr a (fake) terminal the bar shows on stderr; without one stderr stays
empty and every output is byte for byte the same (the bar never reaches a
report, and nothing wraps the request stream when it is off).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, run_cli
from tickgate.util import progress as progress_module

MOONCAKE = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"


def _commands(tmp: Path, workload: Path) -> dict[str, list[str]]:
    return {
        "import": ["import", "mooncake", str(MOONCAKE), "--output", str(tmp / "w.json")],
        "replay": ["replay", "--input", str(workload), "--policy", str(REPO / "policies" / "vllm-v1-bench.yaml"),
                   "--output", str(tmp / "r.json"), "--trace", str(tmp / "t.jsonl")],
        "gate": ["gate", "--input", str(FIXTURES / "release_gate_bad.json"), "--output", str(tmp / "g.json")],
    }


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "mooncake.json"
    res = run_cli("import", "mooncake", str(MOONCAKE), "--limit", "600", "--output", str(path), "--quiet")
    assert res.returncode == 0, res.stderr
    return path


def _on_a_terminal(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                   args: list[str]) -> tuple[int, str, str]:
    from tickgate.commands.cli import main

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("command", ["import", "replay", "gate"])
def test_progress_shows_on_a_terminal_only_and_changes_no_output(
        command: str, workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("TICKGATE_PARALLEL", "1")  # the helpers too: progress lives in the parent
    (tmp_path / "tty").mkdir()
    (tmp_path / "pipe").mkdir()
    code, out, err = _on_a_terminal(capsys, monkeypatch, _commands(tmp_path / "tty", workload)[command])
    assert f"{command}: " in err and "\r" in err
    assert err.rstrip("\r\x1b[A ").count("\n") == 0  # one line redrawn, erased at the end
    assert err not in out

    res = run_cli(*_commands(tmp_path / "pipe", workload)[command], env={"TICKGATE_PARALLEL": "1"})
    assert (res.returncode, res.stderr) == (code, "")
    assert res.stdout == out.replace(str(tmp_path / "tty"), str(tmp_path / "pipe"))
    written = sorted(p.name for p in (tmp_path / "tty").iterdir())
    assert written and written == sorted(p.name for p in (tmp_path / "pipe").iterdir())
    for name in written:
        assert (tmp_path / "tty" / name).read_bytes() == (tmp_path / "pipe" / name).read_bytes(), name


def test_quiet_means_no_progress_even_on_a_terminal(workload: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    args = _commands(tmp_path, workload)["replay"] + ["--quiet"]
    assert _on_a_terminal(capsys, monkeypatch, args) == (0, "", "")


def test_counting_hands_items_through_and_updates_in_batches() -> None:
    updates: list[int] = []

    class Bar:
        def update(self, n: int) -> None:
            updates.append(n)

    items = list(range(progress_module.EVERY * 2 + 5))
    assert list(progress_module.Progress(Bar()).counted(items)) == items
    assert updates == [progress_module.EVERY, progress_module.EVERY, 5]
    assert progress_module.OFF.counted(items) is items  # off: not even a wrapper
