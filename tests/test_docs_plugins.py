"""Every Python block in docs/plugins.md runs (issue 19), so the examples a
plugin author copies cannot rot: each block is executed on its own, as a
module, and a block that defines ``@hookimpl`` functions is then registered
in a fresh registry (pluggy's checks and the hooks themselves run, and every
hook must register something).

A block not meant to run says so on the line before its fence with a reason:

    <!-- docs-test: signature: ... -->   a hook spec's signature, compared with tickgate.host.hookspecs
    <!-- docs-test: exec-only: ... -->   executed, not registered (its hook imports the author's package)
"""

from __future__ import annotations

import inspect
import re
import types
from typing import Any

import pytest
from conftest import REPO

from tickgate.host import hookspecs
from tickgate.host.registry import Registry

DOCS = REPO / "docs" / "plugins.md"
MARKER = re.compile(r"<!-- docs-test: (signature|exec-only): (.+?) -->")


def python_blocks(markdown: str) -> list[tuple[int, str, str]]:
    """(line, mode, code) of each fenced Python block; mode ``run`` unless marked."""
    lines = markdown.splitlines()
    blocks = []
    for start, line in enumerate(lines):
        if line.strip() != "```python":
            continue
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
        marker = MARKER.fullmatch(lines[start - 1].strip()) if start else None
        blocks.append((start + 1, marker.group(1) if marker else "run", "\n".join(lines[start + 1:end]) + "\n"))
    return blocks


BLOCKS = python_blocks(DOCS.read_text(encoding="utf-8"))


def test_the_document_has_blocks_of_each_kind() -> None:
    modes = [mode for _, mode, _ in BLOCKS]
    assert modes.count("signature") == len(hookspecs.HOOK_KINDS) and modes.count("run") >= len(hookspecs.HOOK_KINDS)


@pytest.mark.parametrize(("line", "code"), [(line, code) for line, mode, code in BLOCKS if mode == "signature"],
                         ids=lambda value: f"line{value}" if isinstance(value, int) else "")
def test_signature_blocks_match_the_hook_specs(line: int, code: str) -> None:
    match = re.fullmatch(r"@hookspec\ndef (\w+)(\(.*\) -> None)\n", code)
    assert match, f"docs/plugins.md:{line}: a signature block is '@hookspec' then one 'def' line"
    spec = getattr(hookspecs, match.group(1))
    assert match.group(2) == str(inspect.signature(spec)).replace("'", ""), f"docs/plugins.md:{line}"


@pytest.mark.parametrize(("line", "mode", "code"), [block for block in BLOCKS if block[1] != "signature"],
                         ids=lambda value: f"line{value}" if isinstance(value, int) else "")
def test_python_blocks_run(line: int, mode: str, code: str) -> None:
    module = types.ModuleType(f"plugins_md_line{line}")
    module.__file__ = str(DOCS)  # blocks written as a test module use Path(__file__)
    exec(compile(code, f"docs/plugins.md:{line}", "exec"), module.__dict__)  # noqa: S102 - the docs' own code
    hooks = [name for name in hookspecs.HOOK_KINDS if hasattr(getattr(module, name, None), "tickgate_impl")]
    if mode == "exec-only" or not hooks:
        return
    registry = Registry()
    registry.register_module(module, distribution="docs-example", version="0")
    kinds = {hookspecs.HOOK_KINDS[name] for name in hooks}
    assert {info.kind for info in registry} == kinds, f"docs/plugins.md:{line}: a hook registered nothing"
