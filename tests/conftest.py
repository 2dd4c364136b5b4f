"""Shared test helpers: run the real CLI in a subprocess, locate repository files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (CI is a gate: a run must not fail because
# it happened to draw a new example). Set TICKGATE_HYPOTHESIS_EXPLORE=1 to draw fresh random
# examples when hunting for bugs (docs/DEVELOPING.md); pin what it finds with @example.
settings.register_profile("tickgate-deterministic", derandomize=True)
settings.register_profile("tickgate-explore", derandomize=False)
settings.load_profile("tickgate-explore" if os.environ.get("TICKGATE_HYPOTHESIS_EXPLORE") else
                      "tickgate-deterministic")

#: the kit's fixtures (``tickgate_dist``) for every test, as a third-party adapter's conftest enables them
pytest_plugins = ["tickgate.testing"]

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
POLICIES = REPO / "policies"


#: the source of a tiny third-party admission policy module ("lifo"), for fake distributions
#: (``tickgate.testing.make_dist``) in the plugin tests
LIFO = """
    from tickgate import hookimpl
    from tickgate.interfaces import AdmissionPolicy

    class Lifo(AdmissionPolicy):
        name = "lifo"
        description = "Newest request first."

        def __init__(self):
            self.queue = []

        @classmethod
        def build(cls, options, ctx):
            return cls()

        def enqueue(self, request, tick):
            self.queue.append(request)

        def candidates(self, tick):
            yield from list(reversed(self.queue))

        def admitted(self, request, tick):
            self.queue.remove(request)

        def __len__(self):
            return len(self.queue)

    @hookimpl
    def register_admission_policies(register):
        register(Lifo)
"""


class CliResult:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> CliResult:
    """Run ``python -m tickgate ARGS`` in a fresh process (as users do)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run([sys.executable, "-m", "tickgate", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd or REPO, timeout=600)
    return CliResult(proc)


def children() -> list[int]:
    """Live child processes of this one (Linux /proc), zombies included."""
    me = str(os.getpid())
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                kids.append(int(entry))
    return kids


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(autouse=True)
def _fresh_registry():
    """Each test sees a registry loaded from the installed entry points only."""
    from tickgate.plugins import reset_registry

    reset_registry()
    yield
    reset_registry()


@pytest.fixture
def json_windows(monkeypatch):
    """Set how :class:`tickgate.jsonstream.JsonStream` cuts arrays for one
    test: ``json_windows(n)`` about n bytes of elements per decoding call,
    ``json_windows(None)`` one element at a time (the exact path)."""
    from tickgate import jsonstream

    def cut(size: int | None) -> None:
        if size is None:
            monkeypatch.setattr(jsonstream.JsonStream, "_window", lambda self: (None, False))
        else:
            monkeypatch.setattr(jsonstream, "WINDOW", size)
    return cut
