"""The CLI documentation cannot drift from the click commands (issue 19):
docs/cli.md is regenerated and compared, and every ``tickgate ...`` command
line in README.md and docs/*.md (code blocks, indented blocks, inline code)
names real subcommands and options. Every command in their shell blocks
names only files a clone has (issue 32): a repository path must exist, and
nothing may reach outside the clone (``../shared/...``)."""

from __future__ import annotations

import glob
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


#: fenced blocks whose lines are not shell commands
NOT_SHELL = {"json", "python", "text", "toml", "yaml"}


def code_lines(markdown: str) -> list[tuple[int, str, str]]:
    """(line number, text, fence language) of each line of a fenced or indented block, a line
    ending in a backslash joined with the lines it continues on."""
    found: list[tuple[int, str, str]] = []
    fence: str | None = None
    pending: tuple[int, str] | None = None
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = line.lstrip()[3:].strip() if fence is None else None
            continue
        if fence is None and not line.startswith("    "):
            pending = None
            continue
        start, text = (pending[0], f"{pending[1]} {line.strip()}") if pending else (number, line)
        if text.endswith("\\"):
            pending = (start, text[:-1].rstrip())
            continue
        pending = None
        found.append((start, text, fence or ""))
    return found


def command_lines(markdown: str) -> list[tuple[int, str]]:
    """(line number, text from ``tickgate`` on) of each command line: in a fenced or indented
    block a line that runs tickgate, and in prose each inline code span starting with it."""
    found: list[tuple[int, str]] = []
    for number, line, _ in code_lines(markdown):
        match = re.match(r"\s*(?:\$\s+)?(?:[A-Z_]+=\S*\s+)*(?:\S*/)?(tickgate\s.*)", line)
        if match:
            found.append((number, match.group(1)))
    fenced = False
    for number, line in enumerate(markdown.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and not line.startswith("    "):
            found.extend((number, span) for span in re.findall(r"`(tickgate\s[^`]*)`", line))
    return sorted(found)


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


#: what a clone has at its top: a path starting with one of these names a file of the repository
TOP = {entry.name for entry in REPO.iterdir() if not entry.name.startswith(".git")}


def missing_paths(line: str, here: Path = REPO) -> list[str]:
    """The paths of one shell line that a clone does not have: a path under one of the
    repository's top-level folders that matches no file (from the top, or from ``here``, the
    folder of the document), or any path that climbs out of the clone. Placeholders (``$p``,
    ``<router>``, ``{a,b}``, ``~``) and paths elsewhere (outputs, /tmp) are not checked."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        tokens = line.split()
    found: list[str] = []
    for token in tokens:
        for word in token.split("="):
            path = word.strip("[](),;:'\"`")
            if "/" not in path or re.search(r"[$<>{}~]|\.\.\.|://", path):
                continue
            if path.startswith("../"):  # relative to the document's folder, or meant from the top
                inside = (here / path).resolve().is_relative_to(REPO)
                if not (inside and glob.glob(path, root_dir=here)):
                    outside = not inside or not (REPO / path).resolve().is_relative_to(REPO)
                    found.append(f"{path} {'is outside the clone' if outside else 'does not exist'}")
            elif (path.split("/")[0] in TOP and not glob.glob(path, root_dir=REPO)
                  and not glob.glob(path, root_dir=here)):
                found.append(f"{path} does not exist")
    return found


def shell_lines(markdown: str) -> list[tuple[int, str]]:
    """The commands of a document: code lines outside JSON, Python, text, TOML and YAML blocks
    that are not a JSON value printed as output."""
    return [(number, line) for number, line, fence in code_lines(markdown)
            if fence not in NOT_SHELL and not line.lstrip().startswith(("{", "["))]


#: every Markdown file of the repository but the generated CLI reference
ALL_DOCS = sorted(path for path in REPO.rglob("*.md") if path != REPO / "docs" / "cli.md"
                  and not {".git", ".venv", "node_modules"} & set(path.relative_to(REPO).parts))


def test_every_documented_command_names_files_a_clone_has() -> None:
    missing = [f"{path.relative_to(REPO)}:{number}: {problem}"
               for path in ALL_DOCS
               for number, line in shell_lines(path.read_text(encoding="utf-8"))
               for problem in missing_paths(line, path.parent)]
    assert missing == [], "\n".join(missing)


@pytest.mark.parametrize(("line", "expected"), [
    ("tickgate timing check ../shared/realdata/measured/points.jsonl --output P.jsonl",
     ["../shared/realdata/measured/points.jsonl is outside the clone"]),
    ("VLLM_REFERENCE_DIR=../shared/tools/vllm-reference python x.py", ["../shared/tools/vllm-reference is outside the clone"]),
    ("tickgate replay --input=fixtures/no-such-trace.csv --policy policies/vllm-v1-bench.yaml --output r.json",
     ["fixtures/no-such-trace.csv does not exist"]),
    ("tickgate validate policies/sglang-*.yaml", []),
    ("tickgate replay --input fixtures/admission/$p.json --output /tmp/r.json", []),
    ("tickgate gate --baseline runs/baseline.json --candidate runs/candidate.json", []),
])
def test_the_path_check_catches_missing_files(line: str, expected: list[str]) -> None:
    assert missing_paths(line) == expected


def test_continued_lines_are_one_command() -> None:
    block = "    tickgate replay --input a.json \\\n        --policy ../p.yaml --output r.json\n"
    assert code_lines(block) == [(1, "    tickgate replay --input a.json --policy ../p.yaml --output r.json", "")]


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
