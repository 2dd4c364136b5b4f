"""pytest fixtures of the kit (active with ``-p tickgate.testing``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ..host.registry import reset_registry
from .dists import make_dist

#: what ``tickgate_dist`` returns: call it as :func:`tickgate.testing.make_dist` without ``root``
MakeDist = Callable[..., dict[str, str]]


@pytest.fixture
def tickgate_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeDist]:
    """Install fake plugin distributions for one test.

    ``tickgate_dist(dist, version, module, source, ep_name=None)`` writes the
    distribution (:func:`tickgate.testing.make_dist`) under the test's
    ``tmp_path`` and returns the environment for a ``tickgate`` subprocess; it
    is also put on ``sys.path`` of the test process with the registry reset,
    so in-process calls (``tickgate.commands.cli.main``, ``get_registry()``) see it. On
    teardown its modules are forgotten and the registry is reset again, so the
    next test loads only what is really installed.
    """
    root = tmp_path / "tickgate-dists"
    modules: list[str] = []

    def make(dist: str, version: str, module: str, source: str, ep_name: str | None = None) -> dict[str, str]:
        env = make_dist(root, dist, version, module, source, ep_name)
        if str(root) not in sys.path:
            monkeypatch.syspath_prepend(str(root))
        importlib.invalidate_caches()
        modules.append(module)
        reset_registry()
        return env

    yield make
    for module in modules:
        sys.modules.pop(module, None)
    reset_registry()
