"""A write the system refuses (a full disk) is one line naming the output, exit 2,
and leaves nothing behind: no temporary file, no spool, the old output untouched.

The disk is made full by handing the writer a descriptor of ``/dev/full`` (every
write fails with ENOSPC, as on a full disk) in place of its temporary file's; the
temporary file itself is still created, so the test sees it removed. Each command
runs through the CLI's ``main`` in this process (the patch must reach the writer;
the parallel import's helper inherits it through ``fork``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO

MOONCAKE = FIXTURES / "realdata" / "traces" / "mooncake_conversation_trace.jsonl"
VLLM_REF = FIXTURES / "vllm-reference"
SSE = FIXTURES / "realdata" / "sse" / "sglang_0.5_chat_stream_with_usage_chunk.sse"


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    import tickgate.util.atomic as atomic

    real = atomic._temp_beside

    def on_a_full_disk(path: Path, suffix: str) -> tuple[int, str]:
        fd, name = real(path, suffix)
        os.close(fd)
        return os.open("/dev/full", os.O_RDWR), name

    monkeypatch.setattr(atomic, "_temp_beside", on_a_full_disk)
    monkeypatch.setattr(os, "fchmod", lambda fd, mode: None)  # never change /dev/full's mode


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from tickgate.commands.cli import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


CASES = {
    "replay": ["replay", "--input", str(FIXTURES / "workload.json"), "--output", "{out}"],
    "replay-trace": ["replay", "--input", str(FIXTURES / "workload.json"), "--output", "{dir}/ok.json",
                     "--trace", "{out}"],
    "gate": ["gate", "--input", str(FIXTURES / "release_gate_safe.json"), "--output", "{out}"],
    "normalize": ["normalize", str(SSE), "--output", "{out}"],
    "import": ["import", "mooncake", str(MOONCAKE), "--limit", "50", "--output", "{out}"],
    "import-in-parts": ["import", "mooncake", str(MOONCAKE), "--output", "{out}"],
    "schema": ["schema", "--output", "{out}"],
    "conformance": ["conformance", "vllm", "--workload", str(VLLM_REF / "small-fcfs.workload.json"),
                    "--reference", str(VLLM_REF / "small-fcfs.steps.jsonl"), "--output", "{out}"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_full_disk_names_the_output_and_leaves_nothing_behind(
        case: str, tmp_path: Path, full_disk: None, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("TICKGATE_PARALLEL", "1" if case == "import-in-parts" else "0")
    out = tmp_path / "out.json"
    out.write_text("the old output\n")
    args = [a.format(out=out, dir=tmp_path) for a in CASES[case]]
    code, stdout, stderr = _main(capsys, *args)
    assert (code, stdout, stderr) == (2, "", f"error: {out}: could not write: No space left on device\n")
    assert out.read_text() == "the old output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_a_failed_rename_names_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from tickgate.util.atomic import OutputError, write_json

    def refuse(src: str, dst: str) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "replace", refuse)
    out = tmp_path / "r.json"
    with pytest.raises(OutputError, match=f"^{out}: could not write: Read-only file system$"):
        write_json(out, {"a": 1})
    assert list(tmp_path.iterdir()) == []
