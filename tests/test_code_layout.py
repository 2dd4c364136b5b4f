"""The map of the code cannot drift from the code: docs/DEVELOPING.md's layout is generated from the tree
and the layers contract (``python tools/layout.py``), modules stay small, and the vLLM mirror's module
table in docs/vllm.md lists exactly the modules of ``tickgate_vllm.v1``."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO

#: a module longer than this is split by concern (issue 31)
MAX_LINES = 500


def test_the_developing_guide_shows_the_tree_and_the_layers() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "layout.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_no_module_is_over_the_limit() -> None:
    sources = [*REPO.glob("core/src/tickgate/**/*.py"), *REPO.glob("adapters/*/src/**/*.py")]
    assert len(sources) > 150
    long = sorted(f"{path.relative_to(REPO)}: {n} lines" for path in sources
                  if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
    assert long == [], f"split these modules (limit {MAX_LINES} lines)"


def test_the_vllm_module_table_lists_every_module_of_the_mirror() -> None:
    text = (REPO / "docs" / "vllm.md").read_text(encoding="utf-8")
    section = text.split("\n## Module layout\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `v1/(\w+)\.py` \|", section, flags=re.MULTILINE)
    package = REPO / "adapters" / "vllm" / "src" / "tickgate_vllm" / "v1"
    modules = sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")
    assert sorted(listed) == modules and len(listed) == len(set(listed))


#: ``# type: ignore[code]  # why``: the error it silences and the reason, on its line
_IGNORE = re.compile(r"#\s*type:\s*ignore(?P<code>\[[\w\-, ]+\])?(?P<rest>.*)$")


def test_every_type_ignore_names_its_error_and_says_why() -> None:
    sources = [*REPO.glob("core/src/tickgate/**/*.py"), *REPO.glob("adapters/*/src/**/*.py")]
    bare = []
    for path in sources:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = _IGNORE.search(line)
            if found and not (found["code"] and re.match(r"\s*#\s*\S", found["rest"])):
                bare.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert bare == [], "write `# type: ignore[code]  # why`, or fix the type"


def test_the_walker_of_type_ignores_tells_a_reason_from_none() -> None:
    assert _IGNORE.search("x = f()  # type: ignore[arg-type]  # attrs converter")["rest"].strip()
    assert not _IGNORE.search("x = f()  # type: ignore")["code"]
    assert not _IGNORE.search("x = f()  # type: ignore[misc]")["rest"].strip()
