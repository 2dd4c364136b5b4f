"""No test module imports another (issue 19): shared helpers live in conftest,
helper modules that are not collected (``*_helpers.py``) or the public kit
(``tickgate.testing``), so a test module can move or be deleted alone."""

from __future__ import annotations

import re

from conftest import REPO

IMPORT_OF_A_TEST_MODULE = re.compile(r"^\s*(?:from|import)\s+(?:[\w.]+\.)?test_\w*", re.MULTILINE)


def test_no_test_module_imports_another() -> None:
    roots = [REPO / "tests", *REPO.glob("adapters/*/tests"), *REPO.glob("examples/*/tests")]
    offenders = sorted(str(path.relative_to(REPO)) for root in roots for path in root.rglob("*.py")
                       if IMPORT_OF_A_TEST_MODULE.search(path.read_text(encoding="utf-8")))
    assert offenders == [], "move the shared helpers out of the test module (conftest, *_helpers.py, tickgate.testing)"
