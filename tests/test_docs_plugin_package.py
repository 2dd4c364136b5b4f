"""The plugin package docs/plugins.md shows installs with pip as written (issue 32): its
``pyproject.toml`` block once had no ``version`` and no ``[build-system]``, and pip refused it.

The test takes the toml block and the plugin module's Python block from the document as they
are, adds the one module the plugin imports, installs the folder with the pip of this
environment (``--no-build-isolation --no-index``: offline, with the build backend the snippet
names, which requirements-dev.txt installs) into a temporary target, and asks ``tickgate
plugins`` with that target on the path whether the entry point was found.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

DOC = REPO / "docs" / "plugins.md"
IN_CI = os.environ.get("CI") == "true"

SERVER_LOG = '''\
"""The one module the documented plugin imports: a backend mirror that claims no file."""
from tickgate import BackendMirror


class LlamaCppServerLog(BackendMirror):
    name = "llamacpp-server-log"
    description = "llama.cpp server log (the package of docs/plugins.md)"

    def sniff(self, path, head):
        return False
'''


def fenced_block(markdown: str, language: str, first_line: str) -> str:
    """The fenced ``language`` block whose first line starts with ``first_line``, as written."""
    for body in re.findall(rf"^```{language}\n(.*?)^```$", markdown, flags=re.M | re.S):
        if body.startswith(first_line):
            return body
    raise AssertionError(f"docs/plugins.md has no ```{language} block starting with {first_line!r}")


def backend(pyproject: str) -> str:
    """The build backend's module; pip's default (setuptools' legacy backend) when none is named."""
    match = re.search(r'^build-backend\s*=\s*"([\w.]+)', pyproject, flags=re.M)
    return match.group(1) if match else "setuptools"


def test_the_documented_plugin_package_installs_and_is_found(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    pyproject = fenced_block(text, "toml", "# pyproject.toml")
    plugin = fenced_block(text, "python", "# tickgate_llamacpp/plugin.py")
    module = backend(pyproject).split(".")[0]
    if importlib.util.find_spec(module) is None and not IN_CI:
        pytest.skip(f"the snippet's build backend {module} is not installed (requirements-dev.txt installs it)")

    project = tmp_path / "tickgate-llamacpp"
    package = project / "tickgate_llamacpp"
    package.mkdir(parents=True)
    (project / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "plugin.py").write_text(plugin, encoding="utf-8")
    (package / "server_log.py").write_text(SERVER_LOG, encoding="utf-8")

    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--disable-pip-version-check", "--target", str(site), str(project)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert pip.returncode == 0, f"pip refuses the package of docs/plugins.md:\n{pip.stderr[-3000:]}"

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), *sys.path]))
    listing = subprocess.run([sys.executable, "-m", "tickgate", "plugins"], capture_output=True, text=True,
                             env=env, timeout=120, check=False)
    assert listing.returncode == 0, listing.stderr
    rows = [line.split() for line in listing.stdout.splitlines()]
    assert ["backend_mirror", "llamacpp-server-log", "tickgate-llamacpp", "0.1.0"] in [row[:4] for row in rows]
