"""Fake distributions for plugin tests: a module (or a package copied from a
source tree) plus a ``.dist-info`` with ``entry_points.txt``, written into a
directory that goes on ``PYTHONPATH``. tickgate then discovers the plugin
exactly as it discovers a pip-installed adapter: through
``importlib.metadata`` and the ``tickgate`` entry-point group, with its
distribution name and version in every message.

Plain functions for subprocess tests (they return the environment to run
``tickgate`` with), and the ``tickgate_dist`` fixture (see
:func:`tickgate.testing.tickgate_dist`) that also makes the distribution
visible to the test process itself.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Mapping
from pathlib import Path

from ..host.registry import ENTRY_POINT_GROUP


def _dist_info(root: Path, dist: str, version: str, entry_points: Mapping[str, str]) -> None:
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n", encoding="utf-8"
    )
    lines = [f"{name} = {target}" for name, target in sorted(entry_points.items())]
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n" + "\n".join(lines) + "\n", encoding="utf-8"
    )


def make_dist(
    root: Path, dist: str, version: str, module: str, source: str, ep_name: str | None = None
) -> dict[str, str]:
    """Write ``module.py`` (``source``, dedented) and a distribution ``dist``
    ``version`` whose entry point ``ep_name`` (default: ``dist``) names it.
    Several distributions may share one ``root``. Returns the environment
    (``PYTHONPATH``) under which a ``tickgate`` subprocess finds it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    _dist_info(root, dist, version, {ep_name or dist: module})
    return {"PYTHONPATH": str(root)}


def install_package(
    root: Path, package: Path, dist: str, version: str, entry_points: Mapping[str, str]
) -> dict[str, str]:
    """Copy the package directory ``package`` into ``root`` with a
    ``.dist-info``, as ``pip install`` leaves it (``entry_points``: entry-point
    name -> module). Tests an adapter's real source tree, or a deliberately
    broken copy of it, without a virtual environment. Returns the environment
    (``PYTHONPATH``) for a ``tickgate`` subprocess."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(package, root / package.name)
    _dist_info(root, dist, version, entry_points)
    return {"PYTHONPATH": str(root)}
