"""Loading holes a plugin host must not have (issue 19): a misspelt hook, a
hook with the wrong argument name, a hook spec added without updating a list,
and a broken plugin that must not take ``--help`` or ``tickgate plugins``
down while every other command still refuses to run. Fake distributions come
from the kit (``tickgate.testing.tickgate_dist``), as a third party's would."""

from __future__ import annotations

import types
from typing import Any

import pytest
from conftest import POLICIES, run_cli

from tickgate import hookimpl
from tickgate.host import hookspecs
from tickgate.commands.cli import main
from tickgate.util.errors import PluginError
from tickgate.host.registry import Registry

MISSPELT = """
    from tickgate import hookimpl

    @hookimpl
    def register_scheduler(register):
        raise AssertionError("never called")
"""

WRONG_ARGUMENT = """
    from tickgate import hookimpl

    @hookimpl
    def register_schedulers(reg):
        raise AssertionError("never called")
"""

MISSPELT_LINE = ('error: plugin "typo" from typo-adapter 0.2 implements unknown hook register_scheduler: '
                 "did you mean register_schedulers?")
WRONG_ARGUMENT_LINE = ('error: plugin "wrongarg" from wrongarg-adapter 1.0: register_schedulers(reg) does not '
                       "match the hook spec register_schedulers(register): rename reg (pluggy passes arguments "
                       "by name)")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_misspelt_hook_is_refused_with_the_nearest_name(tickgate_dist: Any,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    tickgate_dist("typo-adapter", "0.2", "typo_adapter", MISSPELT, ep_name="typo")
    code, _, err = cli(capsys, "validate", str(POLICIES / "default.yaml"))
    assert (code, err.strip()) == (2, MISSPELT_LINE)


def test_a_wrong_argument_name_is_one_line_naming_the_distribution(tickgate_dist: Any,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    tickgate_dist("wrongarg-adapter", "1.0", "wrongarg_adapter", WRONG_ARGUMENT, ep_name="wrongarg")
    code, _, err = cli(capsys, "validate", str(POLICIES / "default.yaml"))
    assert (code, err.strip()) == (2, WRONG_ARGUMENT_LINE)


@pytest.mark.parametrize(("source", "line"), [(MISSPELT, MISSPELT_LINE), (WRONG_ARGUMENT, WRONG_ARGUMENT_LINE)])
def test_help_and_plugins_work_with_a_broken_plugin_other_commands_fail_closed(tmp_path: Any, source: str,
                                                                               line: str) -> None:
    from tickgate.testing import make_dist

    dist, ep = ("typo-adapter", "typo") if "typo" in line else ("wrongarg-adapter", "wrongarg")
    version = "0.2" if dist == "typo-adapter" else "1.0"
    env = make_dist(tmp_path / "site", dist, version, dist.replace("-", "_"), source, ep_name=ep)

    help_ = run_cli("--help", env=env)
    assert help_.returncode == 0, help_.stderr
    assert "replay" in help_.stdout and "conformance" in help_.stdout  # the healthy plugins' commands stay

    listed = run_cli("plugins", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    broken = [row for row in listed.json() if row["kind"] == "broken"]
    reason = line.removeprefix("error: ")
    assert broken == [{"kind": "broken", "name": ep, "distribution": dist, "version": version, "entry_point": ep,
                       "description": reason, "reason": reason}]
    assert any(row["name"] == "seed" for row in listed.json())
    assert "TICKGATE_DISABLE_PLUGINS=" + dist in listed.stderr

    text = run_cli("plugins", env=env)
    assert text.returncode == 0 and "broken  " in text.stdout and reason in text.stdout

    for args in (["replay", "--input", "fixtures/workload.json", "--policy", "policies/default.yaml",
                  "--output", str(tmp_path / "r.json")],
                 ["schema"], ["conformance", "vllm", "--help"]):
        res = run_cli(*args, env=env)
        assert (res.returncode, res.stderr.strip()) == (2, line), args
    assert "Traceback" not in help_.stderr + listed.stderr

    assert run_cli("schema", env={**env, "TICKGATE_DISABLE_PLUGINS": dist}).returncode == 0


def test_a_broken_module_leaves_the_registry_as_it_was() -> None:
    module = types.ModuleType("half")

    class Good:
        name = "good"

    def register_workload_readers(register: Any) -> None:
        register(Good)

    def register_gate_signals(register: Any) -> None:
        raise RuntimeError("boom")

    module.register_workload_readers = hookimpl(register_workload_readers)  # type: ignore[attr-defined]
    module.register_gate_signals = hookimpl(register_gate_signals)  # type: ignore[attr-defined]
    registry = Registry()
    with pytest.raises(PluginError, match="failed in register_gate_signals: RuntimeError: boom"):
        registry.register_module(module, distribution="half-dist")
    assert registry.names("workload_reader") == [] and not registry.pm.is_registered(module)


def test_a_new_hook_spec_needs_no_other_edit(monkeypatch: pytest.MonkeyPatch) -> None:
    @hookspecs.spec("load_predictor")
    def register_load_predictors(register: hookspecs.Register) -> None:
        """Register load predictors (kind ``load_predictor``)."""

    monkeypatch.setattr(hookspecs, "register_load_predictors", register_load_predictors, raising=False)

    class Threshold:
        name = "threshold"

    module = types.ModuleType("load_predictors")
    module.register_load_predictors = hookimpl(lambda register: register(Threshold))  # type: ignore[attr-defined]
    registry = Registry()
    assert list(registry.kinds)[-1] == "register_load_predictors"
    registry.register_module(module, distribution="predictor-dist", version="1")
    assert registry.get("load_predictor", "threshold").obj is Threshold
    assert [p.kind for p in registry] == ["load_predictor"]

    misspelt = types.ModuleType("typo_routers")
    misspelt.register_router = hookimpl(lambda register: None)  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match="unknown hook register_router: did you mean register_routers"):
        registry.register_module(misspelt, distribution="typo-dist", version="2")


def test_a_spec_without_a_kind_is_refused() -> None:
    specs = types.ModuleType("specs")

    @hookspecs.hookspec
    def register_things(register: Any) -> None:
        """No kind declared."""

    specs.register_things = register_things  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="register_things declares no plugin kind"):
        hookspecs.hook_kinds(specs)
