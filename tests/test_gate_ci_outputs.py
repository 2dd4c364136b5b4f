"""What a CI system reads of a gate (issue 32): JUnit XML with one test case per signal, a Markdown
summary, GitHub Actions annotations; exit codes unchanged."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from conftest import FIXTURES, run_cli

from tickgate.gate.ci.annotations import workflow_commands
from tickgate.gate.ci.markdown import gate_markdown

BAD = FIXTURES / "release_gate_bad.json"
SAFE = FIXTURES / "release_gate_safe.json"


def _gate(tmp_path: Path, bundle: Path, *extra: str, env: dict[str, str] | None = None):
    out = tmp_path / "g.json"
    res = run_cli("gate", "--input", str(bundle), "--output", str(out), "--junit-xml", str(tmp_path / "g.xml"),
                  "--markdown", str(tmp_path / "g.md"), *extra, env=env)
    return res, json.loads(out.read_text())


def _quiet_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}, **extra}


def test_junit_has_one_test_case_per_signal_and_failures_carry_the_triage(tmp_path: Path) -> None:
    res, report = _gate(tmp_path, BAD, env=_quiet_env())
    assert res.returncode == 20  # rollback, as without the CI outputs
    root = ET.parse(tmp_path / "g.xml").getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [s["id"] for s in report["signals"]]
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert sorted(failed) == sorted(t["signal"] for t in report["triage"] if not t["dry_run"])
    for item in report["triage"]:
        failure = failed[item["signal"]]
        assert failure.get("type") == item["status"] and failure.get("message") == item["message"]
        assert f"next: {item['next_action']}" in (failure.text or "")
    skipped = [c.get("name") for c in cases if c.find("skipped") is not None]
    assert skipped == [s["id"] for s in report["signals"] if s["status"] == "not_evaluated"]
    for element in (root, suite):
        assert element.get("tests") == str(len(cases)) and element.get("failures") == str(len(failed))
    assert suite.get("skipped") == str(len(skipped))
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["decision"] == "rollback" and props["exit_code"] == "20"


def test_the_ci_outputs_are_the_same_bytes_every_time(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    _gate(first, BAD, env=_quiet_env())
    _gate(second, BAD, env=_quiet_env())
    for name in ("g.xml", "g.md"):
        assert (first / name).read_bytes() == (second / name).read_bytes()


def test_markdown_summary_has_the_decision_a_row_per_signal_and_the_next_actions(tmp_path: Path) -> None:
    res, report = _gate(tmp_path, BAD, env=_quiet_env())
    text = (tmp_path / "g.md").read_text()
    assert text.startswith("### tickgate gate: ❌ **rollback** (exit 20)\n")
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| signal")]
    assert [row.split(" | ")[0][2:] for row in rows] == [s["id"] for s in report["signals"]]
    for item in report["triage"]:
        assert f"- {item['signal']} ({item['status']}): {item['next_action']}" in text


def test_a_message_cannot_break_the_markdown_table() -> None:
    report = {
        "decision": "hold", "exit_code": 10, "summary": "hold: x hold",
        "signals": [{"id": "x", "status": "hold", "dry_run": False, "message": "a | b\nc", "unit": None}],
        "triage": [{"signal": "x", "status": "hold", "dry_run": False, "next_action": "look | here"}],
    }
    text = gate_markdown(report)
    (row,) = [line for line in text.splitlines() if line.startswith("| x ")]
    assert row.endswith("| a \\| b c |") and row.count(" | ") == 6
    assert "- x (hold): look \\| here" in text


def test_github_annotations_only_inside_github_actions(tmp_path: Path) -> None:
    res, report = _gate(tmp_path, BAD, "--quiet", env=_quiet_env(GITHUB_ACTIONS="true"))
    lines = res.stdout.splitlines()
    assert res.returncode == 20
    assert [line.split(" ", 1)[0] for line in lines] == ["::error"] * (len(report["triage"]) + 1)
    assert lines[-1] == "::error title=tickgate gate%3A rollback::" + report["summary"]
    assert "%0Anext: " in lines[0] and "\n" not in lines[0]
    quiet, _ = _gate(tmp_path, SAFE, "--quiet", env=_quiet_env())
    assert quiet.returncode == 0 and quiet.stdout == ""


def test_annotation_escapes_follow_githubs_workflow_command_rules() -> None:
    report = {
        "decision": "hold", "summary": "50% of it\r\nheld",
        "signals": [{"id": "a:b,c", "baseline": 1.0, "candidate": 2.0, "delta": 1.0, "threshold": 0.5}],
        "triage": [{"signal": "a:b,c", "status": "hold", "dry_run": False, "message": "up 100%",
                    "next_action": "look"}],
    }
    first, last = workflow_commands(report)
    assert first.startswith("::warning title=tickgate gate%3A a%3Ab%2Cc hold::up 100%25%0Abaseline 1.0, ")
    assert last == "::warning title=tickgate gate%3A hold::50%25 of it%0D%0Aheld"


def test_a_ci_output_never_names_an_input(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.json"
    bundle.write_bytes(BAD.read_bytes())
    res = run_cli("gate", "--input", str(bundle), "--output", str(tmp_path / "g.json"), "--junit-xml", str(bundle))
    assert res.returncode == 2 and "--junit-xml and --input name the same file" in res.stderr
    assert bundle.read_bytes() == BAD.read_bytes()


def test_the_ci_jobs_in_the_docs_parse_and_gate_with_the_files_they_publish() -> None:
    """docs/gate.md, "In CI": both jobs are YAML, run `tickgate gate`, and publish the files it writes
    (GitLab's JUnit report is the --junit-xml file; GitHub's summary is --markdown)."""
    import shlex

    from ruamel.yaml import YAML

    from conftest import REPO

    text = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    section = text.split("\n## In CI\n", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```yaml\n")[1:]
    github, gitlab = (YAML(typ="safe").load(block.split("```", 1)[0]) for block in blocks)
    (run,) = [s["run"] for s in github["jobs"]["gate"]["steps"] if "tickgate gate" in s.get("run", "")]
    args = shlex.split(run.replace('"$GITHUB_STEP_SUMMARY"', "SUMMARY"))
    assert args[args.index("--markdown") + 1] == "SUMMARY"
    (script,) = [line for line in gitlab["gate"]["script"] if line.startswith("tickgate gate")]
    args = shlex.split(script)
    assert gitlab["gate"]["artifacts"]["reports"]["junit"] == args[args.index("--junit-xml") + 1]
    assert args[args.index("--markdown") + 1] in gitlab["gate"]["artifacts"]["paths"]


def test_the_markdown_figures_are_the_reports_digit_for_digit(tmp_path: Path) -> None:
    _, report = _gate(tmp_path, BAD, env=_quiet_env())
    text = (tmp_path / "g.md").read_text()
    latency = next(s for s in report["signals"] if s["id"] == "latency-p95")
    assert f"| {latency['baseline']} | {latency['candidate']} | {latency['delta']} |" in text


JUNIT_XSD = FIXTURES / "junit" / "junit-10.xsd"


def _valid_junit(path: Path) -> None:
    """Valid against the JUnit schema Jenkins' xUnit plugin checks reports with (fixtures/junit)."""
    import xmlschema

    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(path))


def test_the_junit_file_is_valid_against_the_junit_schema(tmp_path: Path) -> None:
    for name, bundle in (("bad", BAD), ("safe", SAFE)):
        where = tmp_path / name
        where.mkdir()
        _gate(where, bundle, env=_quiet_env())
        _valid_junit(where / "g.xml")


def test_the_schema_check_catches_what_jenkins_would_refuse(tmp_path: Path) -> None:
    """The check is real: a skipped count on <testsuites> (which the schema does not define) fails it."""
    import xmlschema

    _gate(tmp_path, BAD, env=_quiet_env())
    text = (tmp_path / "g.xml").read_text().replace("<testsuites ", '<testsuites skipped="1" ', 1)
    broken = tmp_path / "broken.xml"
    broken.write_text(text)
    try:
        _valid_junit(broken)
    except xmlschema.XMLSchemaValidationError:
        return
    raise AssertionError("a <testsuites skipped=...> attribute passed the schema")


def _inconclusive_case(tmp_path: Path, means: str) -> tuple[Any, dict[str, Any]]:
    """A latency change past the threshold that 220 independently noisy pairs cannot tell from noise."""
    import random

    rng = random.Random(9)
    base = [{"request_id": f"r{i}", "latency_ms": round(rng.lognormvariate(6, 1.2), 3)} for i in range(220)]
    cand = [dict(r, latency_ms=round(rng.lognormvariate(6, 1.2) * 1.15, 3)) for r in base]
    run = {"label": "x"}
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps({
        "version": 1, "kind": "tickgate.gate-bundle",
        "baseline": {"version": 1, "kind": "tickgate.observations", "run": run, "requests": base},
        "candidate": {"version": 1, "kind": "tickgate.observations", "run": run, "requests": cand},
    }))
    policy = tmp_path / "p.yaml"
    policy.write_text(f"version: 1\ngate:\n  seed: 1\n  inconclusive: {means}\n  signals:\n"
                      "    - name: latency-p95\n      options: {threshold: 0.10}\n")
    return _gate(tmp_path, bundle, "--policy", str(policy), env=_quiet_env())


def test_an_inconclusive_signal_is_skipped_in_junit_unless_the_policy_holds_on_it(tmp_path: Path) -> None:
    for means, code, child in (("inconclusive", 11, "skipped"), ("hold", 10, "failure")):
        where = tmp_path / means
        where.mkdir()
        res, report = _inconclusive_case(where, means)
        assert res.returncode == code, res.stdout + res.stderr
        assert report["signals"][0]["status"] == "inconclusive"
        (case,) = ET.parse(where / "g.xml").getroot().iter("testcase")
        assert case.find(child) is not None, means
        _valid_junit(where / "g.xml")
        markdown = (where / "g.md").read_text()
        assert f"(exit {code})" in markdown and "❔ inconclusive" in markdown
    annotations = workflow_commands(report)
    assert annotations[0].startswith("::warning title=tickgate gate%3A latency-p95 inconclusive::")


def _vendored_schema(name: str) -> dict[str, Any]:
    """A CI system's own configuration schema, as check-jsonschema vendors it from SchemaStore."""
    from importlib.resources import files

    return json.loads((files("check_jsonschema.builtin_schemas.vendor") / name).read_text(encoding="utf-8"))


def test_the_ci_jobs_in_the_docs_are_valid_workflow_files() -> None:
    """docs/gate.md's GitHub Actions workflow and GitLab CI job against each system's schema."""
    import jsonschema
    from ruamel.yaml import YAML

    from conftest import REPO

    text = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    section = text.split("\n## In CI\n", 1)[1].split("\n## ", 1)[0]
    github, gitlab = (YAML(typ="safe").load(b.split("```", 1)[0]) for b in section.split("```yaml\n")[1:])
    for doc, schema in ((github, "github-workflows.json"), (gitlab, "gitlab-ci.json")):
        jsonschema.validate(doc, _vendored_schema(schema))
    broken = dict(github)
    broken.pop("jobs")  # a workflow without jobs is no workflow: the check must say so
    try:
        jsonschema.validate(broken, _vendored_schema("github-workflows.json"))
    except jsonschema.ValidationError:
        return
    raise AssertionError("a workflow without jobs passed the schema")
