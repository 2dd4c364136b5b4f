"""Shared helpers of the core's tests: run the real CLI in a subprocess, locate repository files
(the hypothesis profile and the kit's fixtures: the repository's conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tickgate import testing

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
POLICIES = REPO / "policies"
#: toy copies of the engine presets before they described real deployments (fixtures/policies/README.md)
TOYS = FIXTURES / "policies"


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


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> testing.CliResult:
    """Run ``python -m tickgate ARGS`` in a fresh process (as users do), from the repository root."""
    return testing.run_cli(*args, env=env, cwd=cwd or REPO)


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
    from tickgate.host.registry import reset_registry

    reset_registry()
    yield
    reset_registry()


@pytest.fixture
def json_windows(monkeypatch):
    """Set how :class:`tickgate.util.jsonstream.JsonStream` cuts arrays for one
    test: ``json_windows(n)`` about n bytes of elements per decoding call,
    ``json_windows(None)`` one element at a time (the exact path)."""
    from tickgate.util import jsonstream

    def cut(size: int | None) -> None:
        if size is None:
            monkeypatch.setattr(jsonstream.JsonStream, "_window", lambda self, json_path, index: (None, False))
        else:
            monkeypatch.setattr(jsonstream, "WINDOW", size)
    return cut
