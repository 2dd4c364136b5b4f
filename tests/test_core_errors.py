"""Bad workloads and policies: one located line, exit 2, no traceback, no output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, POLICIES, run_cli

GOOD_POLICY = (POLICIES / "default.yaml").read_text()
#: the expected locations below count from the policy's first line after its header comment, as
#: the preset was when they were written (one comment line): shift them by what it has now
SHIFT = GOOD_POLICY.splitlines().index("version: 1") - 1


def _shifted(expected: str) -> str:
    """``p.yaml:LINE:`` in ``expected`` moved by :data:`SHIFT`."""
    import re

    return re.sub(r"p\.yaml:(\d+):", lambda m: f"p.yaml:{int(m.group(1)) + SHIFT}:", expected)


def _expect_error(tmp_path: Path, args: list[str], expected: str) -> str:
    out = tmp_path / "out.json"
    out.write_text("previous report\n")
    res = run_cli(*args, "--output", str(out)) if args[0] == "replay" else run_cli(*args)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert expected in lines[0], lines[0]
    assert out.read_text() == "previous report\n"  # never clobbered
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.json")]  # no temp left
    return lines[0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5 "max_output_tokens": 1}\n]}',
         "w.json:2:32: $.requests[0]: invalid JSON: Expecting ',' delimiter"),
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5, "max_output_tokens": 1},\n'
         '{"id": "b", "prompt_tokens": "many", "max_output_tokens": 1}\n]}',
         "w.json:3:1: $.requests[1].prompt_tokens: 'many' is not of type 'integer'"),
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5, "max_output_tokens": 0}\n]}',
         "$.requests[0].max_output_tokens: 0 is less than the minimum of 1"),
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5, "max_output_tokens": 1, "prio": 2}\n]}',
         "$.requests[0]: unknown key 'prio'; expected one of:"),
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5, "max_output_tokens": 1},\n'
         '{"id": "a", "prompt_tokens": 5, "max_output_tokens": 1}\n]}',
         "w.json:3:1: $.requests[1]: duplicate request id 'a'"),
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5, "max_output_tokens": 1, "arrival_tick": 9},\n'
         '{"id": "b", "prompt_tokens": 5, "max_output_tokens": 1, "arrival_tick": 3}\n]}',
         "requests must be in arrival order: arrival_tick 3 comes after 9"),
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5, "max_output_tokens": 1},\n',
         "file ends before the requests list is closed (truncated?)"),
        ('{"version": 2, "requests": []}', "$.version: 1 was expected"),
        ('[1, 2]', "expected a JSON object with version and requests"),
        ('{"version": 1, "requests": [{"id": "a", "prompt_tokens": NaN, "max_output_tokens": 1}]}',
         "NaN is not valid JSON"),
        ('', "invalid JSON: Expecting value"),
        # JSON Schema counts 32.0 as an integer; tickgate does not (it would print as 32.0 in records)
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 32.0, "max_output_tokens": 1}\n]}',
         "w.json:2:1: $.requests[0].prompt_tokens: 32.0 is not of type 'integer'"),
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5, "max_output_tokens": 1, "arrival_tick": 0.0}]}',
         "w.json:2:1: $.requests[0].arrival_tick: 0.0 is not of type 'integer'"),
        ('{"version": 1, "requests": [\n{"id": "a", "prompt_tokens": 5, "max_output_tokens": 1, "tenant": "ab',
         "w.json:2:67: $.requests[0]: invalid JSON: unterminated string (is the file cut short?)"),
    ],
)
def test_bad_workloads(tmp_path: Path, content: str, expected: str) -> None:
    w = tmp_path / "w.json"
    w.write_text(content)
    _expect_error(tmp_path, ["replay", "--input", str(w)], expected)


def test_missing_workload_file(tmp_path: Path) -> None:
    _expect_error(tmp_path, ["replay", "--input", str(tmp_path / "nope.json")], "nope.json: file not found")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("page_size: 16 ", "page_size: 0 ", "p.yaml:7:5: $.scheduler.options.page_size: 0 is less than the minimum of 1"),
        ("name: seed", "name: sead", 'p.yaml:5:3: $.scheduler.name: unknown scheduler "sead"; available: '),
        ("name: priority-fcfs", "name: lifo",
         'p.yaml:13:3: $.admission.name: unknown admission "lifo"; available: '),
        ("    kv_pages: 20", "    kv_pagez: 20", "p.yaml:6:3: $.scheduler.options: unknown key 'kv_pagez'"),
        ("version: 1", "version: 2", "p.yaml:2:1: $.version: 1 was expected"),
        ("version: 1", "version: 1\nsurprise: true", "$: unknown key 'surprise'"),
        ("page_size: 16 ", "page_size: !!python/object:os.system 16 ", "p.yaml:7:5: $.scheduler.options.page_size: YAML tag tag:yaml.org,2002:python/object:os.system is not allowed"),
        ("  options:\n    page_size", "  options:\n   page_size", "p.yaml:8:5: invalid YAML: expected <block end>"),
        # a whole-number float would change every record (16.0 pages) or fail deep in the scheduler
        ("page_size: 16 ", "page_size: 16.0 ", "p.yaml:7:5: $.scheduler.options.page_size: 16.0 is not of type 'integer'"),
        ("    kv_pages: 20", "    kv_pages: 2e1", "p.yaml:8:5: $.scheduler.options.kv_pages: 20.0 is not of type 'integer'"),
    ],
)
def test_bad_policies(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in GOOD_POLICY
    p = tmp_path / "p.yaml"
    p.write_text(GOOD_POLICY.replace(old, new, 1))
    expected = _shifted(expected)
    _expect_error(tmp_path, ["replay", "--input", str(FIXTURES / "workload.json"), "--policy", str(p)], expected)
    _expect_error(tmp_path, ["validate", str(p)], expected)


def test_unknown_plugin_lists_available(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(GOOD_POLICY.replace("name: seed", "name: sead"))
    line = _expect_error(tmp_path, ["validate", str(p)], "available:")
    assert "seed" in line.split("available:")[1]


def test_billion_laughs_is_refused(tmp_path: Path) -> None:
    lol = ["version: 1", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for i in range(8):
        name = chr(ord("b") + i)
        lol.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    p = tmp_path / "p.yaml"
    p.write_text("\n".join(lol) + "\n")
    _expect_error(tmp_path, ["validate", str(p)], "more than 200000 values")


def test_validate_accepts_every_shipped_policy() -> None:
    policies = sorted(str(p) for p in POLICIES.glob("*.yaml"))
    res = run_cli("validate", *policies)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count(": ok") == len(policies)


def test_requires_names_missing_distribution(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(GOOD_POLICY.replace("version: 1", "version: 1\nrequires:\n  - tickgate>=0.1\n"
                                     "  - tickgate-nonexistent>=1.0"))
    _expect_error(tmp_path, ["validate", str(p)],
                  _shifted("p.yaml:5:5: $.requires[1]: this policy requires tickgate-nonexistent>=1.0, which is not "
                           "installed"))
    p.write_text(GOOD_POLICY.replace("version: 1", "version: 1\nrequires: ['tickgate>=99']"))
    _expect_error(tmp_path, ["validate", str(p)], "requires tickgate>=99, but tickgate 0.1.0 is installed")
    p.write_text(GOOD_POLICY.replace("version: 1", "version: 1\nrequires: ['not a req!!']"))
    line = _expect_error(tmp_path, ["validate", str(p)], "$.requires[0]: not a valid requirement 'not a req!!': ")
    assert "\\n" not in line and "^" not in line  # the parser's caret diagram is not one line


def test_output_directory_is_created_and_write_is_atomic(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "dir" / "r.json"
    res = run_cli("replay", "--input", str(FIXTURES / "workload.json"), "--output", str(out))
    assert res.returncode == 0
    assert json.loads(out.read_text())["summary"]["request_count"] == 4
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.json"]


def test_tick_limit_stops_a_replay(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(GOOD_POLICY + "limits:\n  max_ticks: 5\n")
    _expect_error(tmp_path, ["replay", "--input", str(FIXTURES / "workload.json"), "--policy", str(p)],
                  _shifted("p.yaml:17:3: $.limits.max_ticks: replay exceeded the tick limit of 5 steps"))


def test_a_replay_without_progress_stops_with_an_error() -> None:
    import types

    from tickgate.util.errors import ReplayError
    from tickgate.host.hookspecs import hookimpl
    from tickgate.interfaces import AdmissionPolicy
    from tickgate.interfaces.model import Request
    from tickgate.host.registry import get_registry
    from tickgate.host.policy import load_policy
    from tickgate.simulate import replay

    class Never(AdmissionPolicy):
        """Queues everything, offers nothing: a policy bug the engine must survive."""

        name = "never"

        def __init__(self) -> None:
            self.queue: list[Request] = []

        @classmethod
        def build(cls, options, ctx):  # type: ignore[no-untyped-def]
            return cls()

        def enqueue(self, request, tick):  # type: ignore[no-untyped-def]
            self.queue.append(request)

        def candidates(self, tick):  # type: ignore[no-untyped-def]
            return iter(())

        def __len__(self) -> int:
            return len(self.queue)

    module = types.ModuleType("never_plugin")
    module.register_admission_policies = hookimpl(lambda register: register(Never))  # type: ignore[attr-defined]
    get_registry().register_module(module, distribution="never-dist")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.yaml"
        path.write_text(GOOD_POLICY.replace("name: priority-fcfs", "name: never"))
        policy = load_policy(path)
    with pytest.raises(ReplayError, match=r"no progress for 100000 steps at step 100000: 1 requests queued, 0 active"):
        replay([Request(id="a", prompt_tokens=4, max_output_tokens=1)], policy)


def test_validate_checks_gate_sections(tmp_path: Path) -> None:
    text = (POLICIES / "gate-default.yaml").read_text()
    first = text.index("name: ", text.index("signals:"))
    p = tmp_path / "p.yaml"
    p.write_text(text[:first] + "name: latency-p96" + text[text.index("\n", first):])
    line = _expect_error(tmp_path, ["validate", str(p)], 'unknown gate_signal "latency-p96"; available: ')
    assert "p.yaml:" in line and "$.gate.signals[0].name" in line


def test_an_option_on_a_plugin_without_options_says_so(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(GOOD_POLICY.replace("name: priority-fcfs", "name: priority-fcfs\n  options: {foo: 1}"))
    _expect_error(tmp_path, ["validate", str(p)], "$.admission.options: unknown key 'foo'; none are allowed here")


def test_a_directory_given_as_the_policy(tmp_path: Path) -> None:
    _expect_error(tmp_path, ["replay", "--input", str(FIXTURES / "workload.json"), "--policy", str(tmp_path)],
                  f"{tmp_path}: is a directory, expected a file")


@pytest.mark.parametrize(("args", "expected"), [
    (["replay", "--input", "w.json", "--output", "r.json", "--limit", "abc"],
     "error: Invalid value for '--limit': 'abc' is not a valid integer range. (see 'tickgate replay --help')"),
    (["replay", "--bogus"], "error: No such option '--bogus'. (see 'tickgate replay --help')"),
    (["validate"], "error: Missing argument 'POLICIES...'. (see 'tickgate validate --help')"),
    (["nosuch"], "error: No such command 'nosuch'. (see 'tickgate --help')"),
])
def test_command_line_mistakes_are_one_line_too(args: list[str], expected: str) -> None:
    res = run_cli(*args)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [expected]


@pytest.mark.parametrize("args", [[], ["conformance"]])
def test_a_bare_command_group_shows_its_help(args: list[str]) -> None:
    """Bare ``tickgate`` is a question, not a mistake: the help as ``--help`` shows it
    (real line breaks, on stdout), exit 0."""
    res = run_cli(*args)
    assert (res.returncode, res.stderr) == (0, "")
    assert res.stdout == run_cli(*args, "--help").stdout
    assert res.stdout.startswith(" ".join(["Usage: tickgate", *args, "[OPTIONS]"]))
    assert "\\n" not in res.stdout and "\nCommands:\n" in res.stdout


def test_validate_checks_every_file_and_reports_each(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD_POLICY.replace("name: seed", "name: sead"))
    worse = tmp_path / "worse.yaml"
    worse.write_text(GOOD_POLICY.replace("version: 1", "version: 2"))
    good = POLICIES / "default.yaml"
    res = run_cli("validate", str(bad), str(good), str(worse))
    assert res.returncode == 2
    errors = res.stderr.strip().splitlines()
    assert len(errors) == 2
    assert f"bad.yaml:{5 + SHIFT}:3: $.scheduler.name" in errors[0] and f"worse.yaml:{2 + SHIFT}:1" in errors[1]
    assert res.stdout.strip() == f"{good}: ok (scheduler=seed; admission=priority-fcfs; kv_allocator=paged)"
