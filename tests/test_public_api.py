"""The public API (issue 19): what ``tickgate`` exports, that it costs nothing at
start-up, that docs/plugins.md lists it, and that the in-tree adapters and the
example third-party adapter import nothing else from tickgate.

Tests themselves may import internals; plugin packages may not: a submodule
(``tickgate.readers.common``) can move, a top-level name stays.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tickgate

PUBLIC = [name for name in tickgate.__all__ if name != "__version__"]


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
    from tickgate.errors import InputError
    from tickgate.gate import protocol
    from tickgate.hookspecs import Register, hookimpl
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
    assert [m for m in loaded if m.startswith("tickgate")] == ["tickgate", "tickgate.hookspecs"]
    assert not any(m.split(".")[0] in ("jsonschema", "click", "ruamel", "msgspec") for m in loaded), loaded
