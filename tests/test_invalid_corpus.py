"""Every malformed input under fixtures/invalid/ ends in its documented one-line error.

One corpus, one test, every reader. Layout (see fixtures/invalid/README.md):

* ``<folder>/NAME.<ext>`` with ``NAME.expected``: the folder names the reader
  (``COMMANDS`` below; any other folder is a backend-mirror format, read with
  ``normalize --format <folder>``; ``unknown/`` is read with auto-detection);
* ``traces/<fmt>--NAME.<ext>`` with ``<fmt>--NAME.error``: the importer
  engineer's layout (also used by tests/test_importers.py), read with
  ``import <fmt>``.

Cases run in-process through ``tickgate.commands.cli.main`` (a subprocess per case
would cost a minute on a small CI machine); one test re-runs a few in a real
process to check what a user sees there. Each case is run with an output file
that already exists: on failure it must be left byte-for-byte untouched and no
temporary file may be left beside it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli
from tickgate.commands.cli import main

CORPUS = FIXTURES / "invalid"
#: every reader needs at least this many malformed cases
MIN_CASES = 5
SENTINEL = '{"previous": "report"}\n'

#: folder -> command template; {file} is the case, {out} an output path that must stay untouched.
COMMANDS: dict[str, list[str]] = {
    "workload": ["replay", "--input", "{file}", "--output", "{out}"],
    "policy": ["validate", "{file}"],
    "gate-bundle": ["gate", "--input", "{file}", "--output", "{out}"],
    "observations": ["gate", "--baseline", "{file}", "--candidate", "{file}", "--output", "{out}"],
    "unknown": ["normalize", "{file}", "--output", "{out}"],
}


@pytest.fixture(autouse=True)
def _fresh_registry():
    """Shadows conftest's per-test reset: these tests only read the installed
    plugins, and reloading the entry points for each of ~200 cases dominates
    the run time. (conftest still resets before and after other modules.)"""
    yield


def reader_of(case: Path) -> str:
    """The reader a case exercises: its folder, or ``import-<fmt>`` for traces/."""
    folder = case.relative_to(CORPUS).parts[0]
    if folder == "traces":
        return "import-" + case.name.split("--")[0]
    return folder


def command_for(reader: str) -> list[str]:
    if reader in COMMANDS:
        return COMMANDS[reader]
    if reader.startswith("import-"):
        return ["import", reader.removeprefix("import-"), "{file}", "--output", "{out}"]
    # any other folder is named after a backend-mirror format
    return ["normalize", "{file}", "--format", reader, "--output", "{out}"]


def expectation(case: Path) -> Path:
    return case.with_suffix(".error" if case.parent.name == "traces" else ".expected")


def _is_case(p: Path) -> bool:
    return p.is_file() and p.suffix not in (".expected", ".error", ".md")


def cases() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if _is_case(p) and expectation(p).exists())


def _args(case: Path, out: Path) -> list[str]:
    return [a.replace("{file}", str(case)).replace("{out}", str(out)) for a in command_for(reader_of(case))]


@pytest.mark.parametrize("case", cases(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_malformed_input_gives_one_clean_line(case: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    out.write_text(SENTINEL)
    code = main(_args(case, out))
    captured = capsys.readouterr()
    expected = expectation(case).read_text(encoding="utf-8").strip()
    assert code == 2, (captured.out, captured.err)
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ") and case.name in lines[0], lines[0]
    assert expected in lines[0], lines[0]
    assert out.read_text() == SENTINEL  # an existing output is left untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary file left


@pytest.mark.parametrize("rel", ["workload/truncated.json", "policy/billion-laughs.yaml",
                                 "gate-bundle/nan-latency.json", "traces/mooncake--bad-json.jsonl",
                                 "vllm-metrics/nan.prom"])
def test_a_real_process_shows_no_traceback(rel: str, tmp_path: Path) -> None:
    case = CORPUS / rel
    out = tmp_path / "out.json"
    res = run_cli(*_args(case, out))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ")
    assert expectation(case).read_text(encoding="utf-8").strip() in res.stderr
    assert not out.exists()


def test_every_case_has_an_expectation() -> None:
    orphans = [p for p in CORPUS.rglob("*") if _is_case(p) and not expectation(p).exists()]
    assert orphans == []


def test_every_reader_has_enough_cases() -> None:
    """The corpus covers every installed reader: each backend mirror, each
    workload reader (importer), the gate's bundle and observation files, the
    workload and the policy."""
    from tickgate.host.registry import get_registry

    registry = get_registry()
    readers = {*registry.names("backend_mirror"), *(f"import-{n}" for n in registry.names("workload_reader")),
               "gate-bundle", "observations", "workload", "policy"}
    counts = Counter(reader_of(c) for c in cases())
    short = {r: counts.get(r, 0) for r in sorted(readers) if counts.get(r, 0) < MIN_CASES}
    assert short == {}
    assert set(counts) - readers == {"unknown"}  # no folder names a reader that does not exist
