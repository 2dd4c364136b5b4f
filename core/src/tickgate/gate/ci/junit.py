"""The gate report as JUnit XML: one test case per signal, so a CI system that reads JUnit (GitLab's
test reports, Jenkins, Azure Pipelines, GitHub's test-reporter actions) shows each signal as a test.

The layout is the Ant/Jenkins one those systems read (``testsuites`` > ``testsuite`` > ``testcase``,
a ``failure`` or ``skipped`` child). A signal that holds or rolls back and may decide (or is
inconclusive where the policy holds on inconclusive signals) is a
``failure`` whose ``type`` is its status and whose text is its triage (message, figures, next
action); a signal that was not evaluated, or that failed in dry-run, is ``skipped`` with the reason;
a passing signal has no child. The suite's properties carry the decision, its exit code and the
inputs. Nothing depends on the clock: every ``time`` is 0, there is no timestamp, so the same report
gives the same bytes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from .cells import figures, verdict

CLASSNAME = "tickgate.gate"


def _case(suite: ET.Element, signal: Mapping[str, Any], counts: bool) -> str:
    """Add the test case of ``signal``; returns ``pass``, ``failure`` or ``skipped``. ``counts``:
    an inconclusive signal fails the release (the policy's ``gate.inconclusive`` is ``hold``);
    otherwise it is skipped with its message, as the decision does not rest on it."""
    case = ET.SubElement(suite, "testcase", name=str(signal["id"]), classname=CLASSNAME, time="0")
    status = signal["status"]
    if status == "pass":
        return "pass"
    message = str(signal.get("message") or "")
    if status == "not_evaluated" or signal.get("dry_run") or (status == "inconclusive" and not counts):
        ET.SubElement(case, "skipped", message=f"{verdict(signal)}: {message}")
        return "skipped"
    failure = ET.SubElement(case, "failure", message=message, type=str(status))
    lines = [f"{status}: {message}", figures(signal), f"reason: {signal.get('reason')}"]
    if signal.get("next_action"):
        lines.append(f"next: {signal['next_action']}")
    lines.append(f"signal: {signal['signal']} ({signal.get('distribution', '?')})")
    failure.text = "\n".join(lines)
    return "failure"


def junit_xml(report: Mapping[str, Any]) -> bytes:
    """The JUnit XML document of a gate report (UTF-8, with its declaration)."""
    root = ET.Element("testsuites", name="tickgate gate")
    suite = ET.SubElement(root, "testsuite", name=f"tickgate gate: {report['decision']}")
    properties = ET.SubElement(suite, "properties")
    inputs = report.get("inputs", {})
    for name, value in (
        ("decision", report["decision"]),
        ("exit_code", report["exit_code"]),
        ("summary", report["summary"]),
        ("matched", report.get("join", {}).get("matched")),
        ("policy", inputs.get("policy")),
        ("seed", inputs.get("seed")),
        ("inconclusive", inputs.get("inconclusive")),
        ("baseline", inputs.get("baseline", {}).get("file")),
        ("candidate", inputs.get("candidate", {}).get("file")),
    ):
        if value is not None:
            ET.SubElement(properties, "property", name=name, value=str(value))
    counts = {"pass": 0, "failure": 0, "skipped": 0}
    inconclusive_holds = inputs.get("inconclusive") == "hold"
    for signal in report["signals"]:
        counts[_case(suite, signal, inconclusive_holds)] += 1
    totals = {
        "tests": str(len(report["signals"])),
        "failures": str(counts["failure"]),
        "errors": "0",
        "skipped": str(counts["skipped"]),
        "time": "0",
    }
    for key, value in totals.items():
        suite.set(key, value)
        if key != "skipped":  # the testsuites element has no skipped count (Jenkins' junit-10.xsd)
            root.set(key, value)
    out = ET.SubElement(suite, "system-out")
    out.text = "\n".join([report["summary"], *report.get("notes", [])])
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"
