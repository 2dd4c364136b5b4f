"""The third-party path, end to end: examples/tickgate-example-adapter put on
PYTHONPATH with a .dist-info (as pip would install it) is listed by
``tickgate plugins`` under its distribution, its policy replays and gates,
and its own contract tests pass (and fail when its mirror is broken).
.ci/example-adapter.sh does the same with a real pip install in a fresh venv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from tickgate.testing import install_package

EXAMPLE = REPO / "examples" / "tickgate-example-adapter"
DIST = "tickgate-example-adapter"


def install(root: Path, src: Path = EXAMPLE / "src") -> dict[str, str]:
    """The example's package with a .dist-info next to it, as `pip install` leaves it."""
    return install_package(root / "site", src / "tickgate_example_adapter", DIST, "0.1.0",
                           {"example": "tickgate_example_adapter.plugin"})


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return install(tmp_path_factory.mktemp("example"))


def test_plugins_lists_the_example_and_every_adapter(env: dict[str, str]) -> None:
    res = run_cli("plugins", "--json", env=env)
    assert res.returncode == 0, res.stderr
    rows = {(p["kind"], p["name"]): p["distribution"] for p in res.json()}
    assert rows[("backend_mirror", "example-csv")] == DIST
    assert rows[("admission", "shortest-prompt-aging")] == DIST
    assert {"tickgate", "tickgate-vllm", "tickgate-sglang", "tickgate-trtllm", DIST} <= set(rows.values())


def test_replay_with_the_examples_policy(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    res = run_cli("replay", "--input", "samples/workload.json", "--policy", "policies/example.yaml",
                  "--output", str(out), env=env, cwd=EXAMPLE)
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["plugins"]["admission"]["name"] == "shortest-prompt-aging"
    assert report["summary"]["completed_requests"] == report["summary"]["request_count"] == 40


@pytest.mark.parametrize(("candidate", "decision", "code"),
                         [("candidate.csv", "promote", 0), ("candidate-slow.csv", "hold", 10)])
def test_gate_on_the_examples_csv(env: dict[str, str], tmp_path: Path, candidate: str, decision: str,
                                  code: int) -> None:
    out = tmp_path / "gate.json"
    res = run_cli("gate", "--baseline", "samples/baseline.csv", "--candidate", f"samples/{candidate}",
                  "--policy", "policies/example.yaml", "--output", str(out), env=env, cwd=EXAMPLE)
    assert res.returncode == code, res.stderr
    report = json.loads(out.read_text())
    assert report["decision"] == decision and report["join"]["matched"] == 240
    assert report["inputs"]["candidate"]["format"] == "example-csv"


def test_policy_without_the_example_installed_is_a_clear_error(tmp_path: Path) -> None:
    res = run_cli("validate", "policies/example.yaml", cwd=EXAMPLE)
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error: policies/example.yaml:7:5: $.requires[0]: this policy requires "
                                         "tickgate-example-adapter>=0.1, which is not installed")


def _example_tests(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *args, "tests"],
                          capture_output=True, text=True, cwd=EXAMPLE, env={**os.environ, **env}, timeout=300)


def test_the_examples_own_contract_tests_pass(env: dict[str, str]) -> None:
    res = _example_tests(env)
    assert res.returncode == 0, res.stdout[-3000:]
    assert res.stdout.count("PASSED tests/test_contracts.py::") >= 20 and "FAILED" not in res.stdout


def test_the_contract_kit_catches_a_mirror_that_crashes_on_bad_input(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(EXAMPLE / "src", src)
    mirror = src / "tickgate_example_adapter" / "csv_mirror.py"
    mirror.write_text(mirror.read_text().replace(
        "        lines = _lines(self._text(path))\n",
        "        lines = _lines(self._text(path))\n        lines[0].split()[1]  # bug: crashes on short input\n", 1))
    res = _example_tests(install(tmp_path / "broken", src), "-k", "TestExampleCsvMirror")
    assert res.returncode == 1, res.stdout[-3000:]
    assert ("FAILED tests/test_contracts.py::TestExampleCsvMirror::test_bad_input_is_valid_output_or_a_clean_error"
            in res.stdout)
