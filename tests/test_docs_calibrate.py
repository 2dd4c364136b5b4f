"""docs/calibrate.md's workflow runs as written: every ``tickgate ...`` command of its shell blocks, in
order, in a temporary directory (``fixtures`` linked in, so the repository paths resolve and every
output lands in the temporary directory), exits 0, or 10 where the line says ``# hold: exit 10``."""

from __future__ import annotations

import shlex
from pathlib import Path

from conftest import REPO, run_cli

DOC = REPO / "docs" / "calibrate.md"


def commands() -> list[tuple[list[str], int]]:
    """(arguments after ``tickgate``, expected exit code) of each command of the shell blocks."""
    found: list[tuple[list[str], int]] = []
    fence: str | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence == "bash" and line.startswith("tickgate "):
            words = shlex.split(line, comments=True)
            found.append((words[1:], 10 if "# hold: exit 10" in line else 0))
    return found


def test_the_doc_has_the_whole_workflow() -> None:
    names = [" ".join(args[:2]) if args[0] == "timing" else args[0] for args, _ in commands()]
    assert names[:3] == ["import", "timing check", "timing fit"] and "gate" in names
    assert [code for args, code in commands() if args[0] == "gate"] == [0, 10, 10]


def test_every_command_of_docs_calibrate_runs(tmp_path: Path) -> None:
    (tmp_path / "fixtures").symlink_to(REPO / "fixtures")
    for args, code in commands():
        for i, word in enumerate(args[:-1]):
            if word in ("--output", "-o"):
                assert "/" not in args[i + 1], f"{args}: outputs go to the current directory"
        res = run_cli(*args, cwd=tmp_path)
        assert res.returncode == code, (args, res.stdout, res.stderr)
    assert (tmp_path / "fitted.yaml").is_file() and (tmp_path / "gate-slow.json").is_file()
    assert not (REPO / "fixtures" / "fitted.yaml").exists()  # nothing written through the link
