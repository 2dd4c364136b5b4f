"""Optional plugin attributes (issue 19): each is declared, with its default, on
the base of its kind, and the core reads it through one helper, so a plugin
that matches the protocol without subclassing the base gets the same default."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest
from conftest import REPO

from tickgate import hookimpl, interfaces
from tickgate.util.errors import InputError
from tickgate.interfaces import optional_attribute
from tickgate.host.registry import get_registry

#: attribute -> (its base, its default)
DECLARED = {
    "uses_admission_policy": (interfaces.Scheduler, True),
    "supported_admission": (interfaces.Scheduler, None),
    "uses_kv_allocator": (interfaces.Scheduler, True),
    "admission_note": (interfaces.Scheduler, "engine semantics"),
    "decoded_lists_every_sample": (interfaces.Scheduler, True),
    "accepts_transferred_kv": (interfaces.Scheduler, False),
    "supports_data_parallel": (interfaces.Scheduler, False),
    "has_prefix_cache": (interfaces.KvAllocator, False),
    "dynamic": (interfaces.AdmissionPolicy, False),
    "declared_kind": (interfaces.BackendMirror, None),
    "accepts_line": (interfaces.BackendMirror, False),
    "artifact_files": (interfaces.BackendMirror, ()),
    "reads_parts": (interfaces.WorkloadReader, False),
    "default_block_size": (interfaces.WorkloadReader, None),
    "file_kind": (interfaces.WorkloadReader, None),
    "source": (interfaces.WorkloadReader, None),
}


@pytest.mark.parametrize("attribute", sorted(DECLARED))
def test_the_base_declares_it_and_a_duck_typed_plugin_gets_that_default(attribute: str) -> None:
    base, default = DECLARED[attribute]
    assert getattr(base, attribute) == default
    assert optional_attribute(object(), attribute) == default
    subclass = type("Mine", (base,), {attribute: "mine"})
    assert optional_attribute(subclass, attribute) == optional_attribute(subclass(), attribute) == "mine"


def test_the_core_reads_optional_attributes_only_through_the_helper() -> None:
    names = "|".join(DECLARED)
    pattern = re.compile(rf"getattr\([^()]*, ['\"]({names})['\"]")
    offenders = [f"{path.relative_to(REPO)}:{number}" for path in sorted((REPO / "core/src/tickgate").rglob("*.py"))
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if pattern.search(line) and path.name != "interfaces.py"]
    assert offenders == [], "read optional plugin attributes with tickgate.interfaces.optional_attribute"


class DuckMirror:
    """A backend mirror that subclasses nothing (no ``accepts_line``, no ``declared_kind``)."""

    name, description = "duck-obs", "duck-typed mirror"
    sniff = staticmethod(lambda path, head: head.startswith(b"#duck"))
    read = staticmethod(lambda path: {"version": 1, "kind": "tickgate.observations", "run": {"backend": "duck"},
                                      "requests": [{"request_id": "a", "latency_ms": 1.0}]})


def test_a_duck_typed_mirror_reads_and_refuses_a_line_selector(tmp_path: Path) -> None:
    from tickgate.gate.detect import read_observations

    module = types.ModuleType("duck_plugin")
    module.register_backend_mirrors = hookimpl(lambda register: register(DuckMirror))  # type: ignore[attr-defined]
    get_registry().register_module(module, distribution="duck-dist", version="1.0")
    path = tmp_path / "run.duck"
    path.write_text("#duck\n")
    assert json.dumps(read_observations(path)["requests"]) == '[{"request_id": "a", "latency_ms": 1.0}]'
    with pytest.raises(InputError, match='format "duck-obs" holds one run per file'):
        read_observations(f"{path}#2")
