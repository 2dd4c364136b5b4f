"""Every malformed input under fixtures/invalid/ ends in its documented one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli

CORPUS = FIXTURES / "invalid"

#: folder -> command template; {file} is the case, {out} an output path that must not appear.
COMMANDS: dict[str, list[str]] = {
    "workload": ["replay", "--input", "{file}", "--output", "{out}"],
    "policy": ["validate", "{file}"],
    "gate-bundle": ["gate", "--input", "{file}", "--output", "{out}"],
    "observations": ["gate", "--baseline", "{file}", "--candidate", "{file}", "--output", "{out}"],
}


def command_for(folder: str) -> list[str]:
    if folder in COMMANDS:
        return COMMANDS[folder]
    if folder.startswith("import-"):
        return ["import", folder.removeprefix("import-"), "{file}", "--output", "{out}"]
    # any other folder is named after a backend-mirror format
    return ["normalize", "{file}", "--format", folder, "--output", "{out}"]


def cases() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.suffix not in (".expected", ".md")
                  and p.with_suffix(".expected").exists())


@pytest.mark.parametrize("case", cases(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_malformed_input_gives_one_clean_line(case: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    folder = case.relative_to(CORPUS).parts[0]
    args = [a.replace("{file}", str(case)).replace("{out}", str(out)) for a in command_for(folder)]
    res = run_cli(*args)
    expected = case.with_suffix(".expected").read_text().strip()
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ") and str(case.name) in lines[0], lines[0]
    assert expected in lines[0], lines[0]
    assert not out.exists()


def test_every_case_has_an_expectation() -> None:
    orphans = [p for p in CORPUS.rglob("*") if p.is_file() and p.suffix not in (".expected", ".md")
               and not p.with_suffix(".expected").exists()]
    assert orphans == []
