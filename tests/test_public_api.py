"""The public API (issue 19): what ``tickgate`` exports, that it costs nothing at
start-up, that docs/plugins.md lists it, and that the in-tree adapters and the
example third-party adapter import nothing else from tickgate.

Tests themselves may import internals; plugin packages may not: a submodule
(``tickgate.readers.common``) can move, a top-level name stays.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

import tickgate

PUBLIC = [name for name in tickgate.__all__ if name != "__version__"]
PLUGIN_SOURCES = sorted([*REPO.glob("adapters/*/src/**/*.py"), *REPO.glob("examples/*/src/**/*.py")])


def test_every_name_in_all_resolves_and_dir_lists_it() -> None:
    assert len(set(tickgate.__all__)) == len(tickgate.__all__), "a name is listed twice"
    for name in tickgate.__all__:
        assert getattr(tickgate, name) is not None, name
    assert set(tickgate.__all__) <= set(dir(tickgate))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        tickgate.not_a_name  # noqa: B018
    with pytest.raises(ImportError):
        exec("from tickgate import not_a_name")  # noqa: S102


def test_public_names_are_the_objects_tickgate_itself_uses() -> None:
    from tickgate.util.errors import InputError
    from tickgate.interfaces import gate as protocol
    from tickgate.host.hookspecs import Register, hookimpl
    from tickgate.interfaces import GateSignal

    assert tickgate.hookimpl is hookimpl and tickgate.Register is Register
    assert tickgate.InputError is InputError
    assert tickgate.GateSignal is GateSignal is protocol.GateSignal, "one GateSignal base"


def _modules_after(code: str) -> dict[str, list[str]]:
    script = (f"import json, sys\n{code}\n"
              "print(json.dumps(sorted(m for m in sys.modules if m == 'tickgate' or m.startswith('tickgate.') "
              "or m.split('.')[0] in ('pluggy', 'jsonschema', 'click', 'ruamel', 'msgspec', 'orjson', 'attrs'))))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_import_tickgate_imports_no_submodule() -> None:
    assert _modules_after("import tickgate; tickgate.__version__") == ["tickgate"]


def test_a_name_imports_only_its_own_module() -> None:
    loaded = _modules_after("from tickgate import hookimpl, Register")
    assert [m for m in loaded if m.startswith("tickgate")] == ["tickgate", "tickgate.host", "tickgate.host.hookspecs"]
    assert not any(m.split(".")[0] in ("jsonschema", "click", "ruamel", "msgspec") for m in loaded), loaded


def _tickgate_imports(path: Path) -> list[tuple[int, str]]:
    """(line, what) for every import of tickgate that is not a public top-level name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if a.name.startswith("tickgate.")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("tickgate."):
                found.append((node.lineno, f"from {node.module} import ..."))
            elif node.module == "tickgate":
                found += [(node.lineno, f"from tickgate import {a.name} (not in tickgate.__all__)")
                          for a in node.names if a.name not in tickgate.__all__]
    return found


def test_the_walker_sees_every_way_of_importing_a_submodule(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import tickgate.interfaces.model\nfrom tickgate.readers.common import Fields\n"
                     "from tickgate import readers, hookimpl\nimport tickgate\n", encoding="utf-8")
    assert [line for line, _ in _tickgate_imports(probe)] == [1, 2, 3]


def test_plugin_packages_import_only_the_public_api() -> None:
    assert len(PLUGIN_SOURCES) > 20, "the adapters' sources were not found"
    offenders = [f"{path.relative_to(REPO)}:{line}: {what}"
                 for path in PLUGIN_SOURCES for line, what in _tickgate_imports(path)]
    assert offenders == [], "import these from tickgate (add a name to tickgate.__all__ if one is missing):\n" \
        + "\n".join(offenders)


def test_docs_list_the_public_api() -> None:
    text = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = text.split("\n## Public API\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(PUBLIC), "docs/plugins.md, Public API: one row per name in tickgate.__all__"
    assert len(listed) == len(set(listed))


def test_the_type_checking_block_is_the_export_table() -> None:
    """Type checkers and editors read the generated ``if TYPE_CHECKING:`` imports; the lazy resolver
    reads ``_EXPORTS``: the two name the same objects (``python tools/public_api.py`` regenerates)."""
    init = REPO / "core" / "src" / "tickgate" / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    imported = {alias.asname or alias.name: f"{node.module}:{alias.name}"
                for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    table = {name: target if ":" in target else f"{target}:{name}" for name, target in tickgate._EXPORTS.items()}
    assert imported == table, "run python tools/public_api.py"
    assert all(isinstance(node, ast.ImportFrom) and node.level == 1 for node in block.body)


def test_the_public_names_fall_into_the_documented_groups() -> None:
    """The contract, the building blocks, running tickgate and the readers' kit: each name in one group,
    and docs/plugins.md lists each group's names under its own heading."""
    groups = {"_CONTRACT": "The plugin contract", "_BUILDING_BLOCKS": "Building blocks",
              "_RUNNING": "Running tickgate", "_READERS_KIT": "The readers' kit"}
    names = [name for group in groups for name in getattr(tickgate, group)]
    assert sorted(names) == sorted(tickgate._EXPORTS) and len(names) == len(set(names))
    text = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")
    section = text.split("\n## Public API\n", 1)[1].split("\n## ", 1)[0]
    for group, heading in groups.items():
        part = section.split(f"\n### {heading}\n", 1)[1].split("\n### ", 1)[0]
        listed = re.findall(r"^\| `(\w+)` \|", part, flags=re.MULTILINE)
        assert sorted(listed) == sorted(getattr(tickgate, group)), heading
