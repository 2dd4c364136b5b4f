"""Every hook is documented and tested (datasette's meta-tests): docs/plugins.md
has a ``## <hook>`` section with a code example and tests/test_hooks.py has
``test_<hook>`` for each name in tickgate.host.hookspecs.HOOK_KINDS. Adding a hook
without both fails here, and so does removing a hook's documentation."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

from tickgate.host.hookspecs import HOOK_KINDS

DOCS = REPO / "docs" / "plugins.md"
HOOK_TESTS = REPO / "tests" / "test_hooks.py"


def doc_sections(markdown: str) -> dict[str, str]:
    """``## heading`` -> the text up to the next ``## `` heading."""
    sections: dict[str, str] = {}
    for block in re.split(r"^## ", markdown, flags=re.MULTILINE)[1:]:
        heading, _, body = block.partition("\n")
        sections[heading.strip()] = body
    return sections


def undocumented(markdown: str, hooks: list[str]) -> list[str]:
    """Hooks without a section that holds a fenced Python example."""
    sections = doc_sections(markdown)
    return [hook for hook in hooks if "```python" not in sections.get(hook, "")]


def untested(source: str, hooks: list[str]) -> list[str]:
    return [hook for hook in hooks if not re.search(rf"^def test_{hook}\(", source, flags=re.MULTILINE)]


def test_every_hook_is_documented() -> None:
    assert undocumented(DOCS.read_text(encoding="utf-8"), list(HOOK_KINDS)) == []


def test_every_hook_has_a_test() -> None:
    assert untested(HOOK_TESTS.read_text(encoding="utf-8"), list(HOOK_KINDS)) == []


def test_removing_a_hooks_docs_is_caught(tmp_path: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    for hook in HOOK_KINDS:
        sections = re.split(r"(?=^## )", text, flags=re.MULTILINE)
        kept = [s for s in sections if not s.startswith(f"## {hook}\n")]
        assert len(kept) == len(sections) - 1, f"docs/plugins.md has no '## {hook}' section"
        copy = tmp_path / "plugins.md"
        copy.write_text("".join(kept), encoding="utf-8")
        assert undocumented(copy.read_text(encoding="utf-8"), list(HOOK_KINDS)) == [hook]


def test_a_section_without_an_example_is_caught() -> None:
    text = DOCS.read_text(encoding="utf-8")
    stripped = re.sub(r"(## register_commands\n.*?)```python.*?```", r"\1", text, flags=re.DOTALL)
    stripped = re.sub(r"(## register_commands\n.*?)```python.*?```", r"\1", stripped, flags=re.DOTALL)
    assert undocumented(stripped, list(HOOK_KINDS)) == ["register_commands"]


def test_removing_a_hooks_test_is_caught() -> None:
    source = HOOK_TESTS.read_text(encoding="utf-8").replace("def test_register_gate_signals(", "def helper(")
    assert untested(source, list(HOOK_KINDS)) == ["register_gate_signals"]
