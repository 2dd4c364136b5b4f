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

For tests of the loading path itself, ``make_dist`` / ``install_package``
write a fake distribution with entry points (a subprocess finds it through
the returned ``PYTHONPATH``) and the ``tickgate_dist`` fixture does the same
for the test process too; ``run_cli`` runs the real command in a fresh process.

See docs/plugins.md ("The contract kit", "Fake distributions").
"""

from __future__ import annotations

from typing import Any

from .cli import CliResult, run_cli
from .contracts import (
    AdmissionPolicyContract,
    PluginContract,
    SchedulerContract,
    TimingModelContract,
)
from .dists import install_package, make_dist
from .fixtures import tickgate_dist
from .fleet_contracts import AutoscalerContract, RouterContract
from .io_contracts import BackendMirrorContract, GateSignalContract, WorkloadReaderContract
from .support import contract_workload, fresh_registry

__all__ = [
    "AdmissionPolicyContract",
    "AutoscalerContract",
    "BackendMirrorContract",
    "CliResult",
    "GateSignalContract",
    "PluginContract",
    "RouterContract",
    "SchedulerContract",
    "TimingModelContract",
    "WorkloadReaderContract",
    "contract_workload",
    "fresh_registry",
    "install_package",
    "make_dist",
    "run_cli",
    "tickgate_dist",
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
