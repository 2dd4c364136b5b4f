"""``tickgate.testing``: contract tests any adapter or policy package runs
against its own plugins.

Opt in (it is deliberately *not* a ``pytest11`` entry point, so installing
tickgate never changes anyone else's test run)::

    # conftest.py, or the test module itself
    pytest_plugins = ["tickgate.testing"]        # or: pytest -p tickgate.testing

then subclass a contract, name the plugin and give sample inputs; the
inherited tests check registration through an entry point, the options
schema, determinism (also across ``PYTHONHASHSEED``), clean errors on bad
input and, for backend mirrors, the round trip through the neutral
observations schema and ``tickgate gate``::

    from tickgate.testing import BackendMirrorContract

    class TestMyCsv(BackendMirrorContract):
        plugin_name = "my-csv"
        distribution = "tickgate-my-adapter"
        sample = Path(__file__).parent / "data" / "run.csv"

See docs/plugins.md ("The contract kit").
"""

from __future__ import annotations

from typing import Any

from .contracts import AdmissionPolicyContract, PluginContract, SchedulerContract
from .io_contracts import BackendMirrorContract, GateSignalContract, WorkloadReaderContract
from .support import contract_workload, fresh_registry

__all__ = [
    "AdmissionPolicyContract",
    "BackendMirrorContract",
    "GateSignalContract",
    "PluginContract",
    "SchedulerContract",
    "WorkloadReaderContract",
    "contract_workload",
    "fresh_registry",
]


def pytest_configure(config: Any) -> None:
    """Register the ``tickgate_contract`` marker (``-m tickgate_contract`` runs only the kit)."""
    config.addinivalue_line("markers", "tickgate_contract: a tickgate plugin contract test")


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """Mark every test a contract class contributes, so ``-m tickgate_contract`` selects them."""
    import pytest

    for item in items:
        cls = getattr(item, "cls", None)
        if cls is not None and issubclass(cls, PluginContract):
            item.add_marker(pytest.mark.tickgate_contract)
