"""The CLI documentation cannot drift from the click commands (issue 19):
docs/cli.md is regenerated and compared, and every ``tickgate ...`` command
line in README.md and docs/*.md (code blocks, indented blocks, inline code)
names real subcommands and options."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from conftest import REPO

from tickgate.commands.cli import cli

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
FIX = "python tools/cli_reference.py"


def test_the_cli_reference_is_up_to_date() -> None:
    proc = subprocess.run([sys.executable, "tools/cli_reference.py", "--stdout"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    committed = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert proc.stdout == committed, f"docs/cli.md differs from the click commands: run `{FIX}` and commit it"


def command_lines(markdown: str) -> list[tuple[int, str]]:
    """(line number, text from ``tickgate`` on) of each command line: in a fenced or indented
    block a line that runs tickgate, and in prose each inline code span starting with it."""
    found: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            match = re.match(r"\s*(?:\$\s+)?(?:[A-Z_]+=\S*\s+)*(?:\S*/)?(tickgate\s.*)", line)
            if match:
                found.append((number, match.group(1)))
            continue
        found.extend((number, span) for span in re.findall(r"`(tickgate\s[^`]*)`", line))
    return found


def problems(line: str) -> list[str]:
    """What in one command line the real CLI does not have."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        tokens = line.split()
    command: click.Command = cli
    ctx = click.Context(cli, info_name="tickgate")
    path = ["tickgate"]
    known = {"--help", "-h", "--debug", "--version"}
    found: list[str] = []
    descending = True  # subcommand names come first, then the arguments
    for token in tokens[1:]:
        if token in {"|", "&&", ";", "2>&1"} or token.startswith((">", "#")):
            break
        if descending and isinstance(command, click.Group) and re.fullmatch(r"[a-z][a-z-]*", token):
            sub = command.get_command(ctx, token)
            if sub is None:
                found.append(f"no command '{' '.join(path)} {token}'")
                break
            command, ctx = sub, click.Context(sub, info_name=token, parent=ctx)
            path.append(token)
            known |= {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
            continue
        descending = False
        for option in re.findall(r"(?:^|[\[/|])(--?[A-Za-z][\w-]*)", token):
            if option not in known:
                found.append(f"'{' '.join(path)}' has no option {option}")
    return found


def test_every_documented_command_line_is_real() -> None:
    drift = [f"{path.relative_to(REPO)}:{number}: {line}: {problem}"
             for path in DOCS for number, line in command_lines(path.read_text(encoding="utf-8"))
             for problem in problems(line)]
    assert drift == [], "\n".join(drift)


@pytest.mark.parametrize(("line", "expected"), [
    ("tickgate import --format NAME", ["'tickgate import' has no option --format"]),
    ("tickgate frobnicate --now", ["no command 'tickgate frobnicate'"]),
    ("tickgate normalize FILE... [--format auto|NAME] [--output obs.json]", []),
    ("tickgate gate --baseline/--candidate", []),
    ("tickgate conformance vllm --workload W --reference R --output O", []),
])
def test_the_check_catches_drift(line: str, expected: list[str]) -> None:
    assert problems(line) == expected
