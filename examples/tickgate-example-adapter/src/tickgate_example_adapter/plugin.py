"""Entry point ``example = tickgate_example_adapter.plugin`` (see pyproject.toml).

Keep this module light: ``tickgate`` imports it at start-up for every command,
so implementation modules are imported inside the hook bodies, only when the
registry is built.
"""

from __future__ import annotations

from tickgate import Register, hookimpl


@hookimpl
def register_backend_mirrors(register: Register) -> None:
    from .csv_mirror import ExampleCsvMirror

    register(ExampleCsvMirror)


@hookimpl
def register_admission_policies(register: Register) -> None:
    from .admission import ShortestPromptAging

    register(ShortestPromptAging)
