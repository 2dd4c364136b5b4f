"""Run the real ``tickgate`` command in a fresh process, as a user does, from a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


class CliResult:
    """What a ``tickgate`` run left: exit status, standard output and error."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None, timeout: float = 600
) -> CliResult:
    """``python -m tickgate ARGS`` with this interpreter in a fresh process
    (``env`` added to this process's environment), so plugins load from entry
    points and errors reach stderr as a user sees them."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run(
        [sys.executable, "-m", "tickgate", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )
    return CliResult(proc)
