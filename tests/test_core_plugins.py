"""The plugin machinery, exercised through real entry points of throwaway distributions.

Each test writes a tiny distribution (a module plus a ``.dist-info`` with an
``entry_points.txt``) into a temporary directory on PYTHONPATH, so tickgate
discovers it exactly as it discovers a pip-installed adapter.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import FIXTURES, LIFO, POLICIES, run_cli

from tickgate.testing import make_dist


def test_third_party_plugin_is_listed_and_usable(tmp_path: Path) -> None:
    env = make_dist(tmp_path / "site", "toy-adapter", "1.2.3", "toy_adapter", LIFO)
    res = run_cli("plugins", "--json", env=env)
    assert res.returncode == 0, res.stderr
    rows = {(p["kind"], p["name"]): p for p in res.json()}
    assert rows[("admission", "lifo")]["distribution"] == "toy-adapter"
    assert rows[("admission", "lifo")]["version"] == "1.2.3"
    assert rows[("scheduler", "seed")]["distribution"] == "tickgate"

    text = run_cli("plugins", env=env).stdout
    assert "lifo" in text and "toy-adapter 1.2.3" in text

    policy = tmp_path / "p.yaml"
    policy.write_text((POLICIES / "default.yaml").read_text().replace("name: priority-fcfs", "name: lifo"))
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--policy", str(policy),
                  "--output", str(out), env=env)
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert report["plugins"]["admission"]["name"] == "lifo"
    assert report["summary"]["completed_requests"] == 4


def test_broken_plugin_names_distribution_and_version(tmp_path: Path) -> None:
    env = make_dist(tmp_path / "site", "broken-adapter", "0.0.7", "broken_adapter",
                    "import does_not_exist_anywhere\n", ep_name="broken")
    res = run_cli("schema", env=env)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert res.stderr.strip() == ('error: Error importing plugin "broken" from broken-adapter 0.0.7: '
                                  "ModuleNotFoundError: No module named 'does_not_exist_anywhere'")
    listed = run_cli("plugins", env=env)  # where to look: the broken one is a row, exit 0
    assert listed.returncode == 0
    assert re.search(r"^broken +broken +broken-adapter 0\.0\.7  Error importing plugin", listed.stdout, re.MULTILINE)
    # The user can switch it off and carry on.
    ok = run_cli("plugins", env={**env, "TICKGATE_DISABLE_PLUGINS": "broken-adapter"})
    assert ok.returncode == 0 and "seed" in ok.stdout


def test_duplicate_names_are_refused_naming_both(tmp_path: Path) -> None:
    source = """
        from tickgate import hookimpl
        from tickgate.seed.scheduler import SeedScheduler

        class Copy(SeedScheduler):
            pass

        @hookimpl
        def register_schedulers(register):
            register(Copy)
    """
    env = make_dist(tmp_path / "site", "copycat", "2.0", "copycat", source)
    res = run_cli("schema", env=env)
    assert res.returncode == 2
    msg = res.stderr.strip()
    assert 'duplicate scheduler "seed"' in msg
    assert "tickgate 0.1.0" in msg and "copycat 2.0" in msg


def test_a_hook_that_raises_is_reported_with_its_distribution(tmp_path: Path) -> None:
    source = """
        from tickgate import hookimpl

        @hookimpl
        def register_gate_signals(register):
            raise RuntimeError("boom")
    """
    env = make_dist(tmp_path / "site", "explosive", "3.1", "explosive", source)
    res = run_cli("schema", env=env)
    assert res.returncode == 2
    assert res.stderr.strip() == ('error: plugin "explosive" from explosive 3.1 failed in '
                                  "register_gate_signals: RuntimeError: boom")


def test_plugin_allow_list_limits_what_loads(tmp_path: Path) -> None:
    env = make_dist(tmp_path / "site", "toy-adapter", "1.2.3", "toy_adapter", LIFO)
    res = run_cli("plugins", "--json", env={**env, "TICKGATE_PLUGINS": "nothing-else"})
    names = {p["name"] for p in res.json()}
    assert "lifo" not in names and "seed" in names  # the core always loads


def test_plugin_failing_while_running_is_named(tmp_path: Path) -> None:
    source = LIFO.replace("yield from list(reversed(self.queue))", "raise ValueError('bad queue')")
    env = make_dist(tmp_path / "site", "toy-adapter", "1.2.3", "toy_adapter", source)
    policy = tmp_path / "p.yaml"
    policy.write_text((POLICIES / "default.yaml").read_text().replace("name: priority-fcfs", "name: lifo"))
    out = tmp_path / "r.json"
    res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--policy", str(policy),
                  "--output", str(out), env=env)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().startswith(
        'error: admission "lifo" from toy-adapter 1.2.3 failed at step 0: ValueError: bad queue')
    assert not out.exists()


def test_in_process_registration() -> None:
    import types

    from tickgate.host.hookspecs import hookimpl
    from tickgate.host.registry import Registry

    module = types.ModuleType("inproc")

    class Thing:
        name = "thing"

    @hookimpl
    def register_workload_readers(register):  # type: ignore[no-untyped-def]
        register(Thing)

    module.register_workload_readers = register_workload_readers  # type: ignore[attr-defined]
    registry = Registry()
    registry.register_module(module, distribution="mine", version="9")
    info = registry.get("workload_reader", "thing")
    assert (info.obj, info.distribution, info.version) == (Thing, "mine", "9")
    assert registry.names("workload_reader") == ["thing"]


def test_messages_name_a_plugin_one_way() -> None:
    from tickgate.host.registry import PluginInfo

    info = PluginInfo("gate_signal", "p95", object(), "toy-adapter", "1.2.3", "toy")
    assert info.label() == 'gate_signal "p95" from toy-adapter 1.2.3'
    assert info.label("gate signal") == 'gate signal "p95" from toy-adapter 1.2.3'
