"""The gate report as Markdown: the decision, one table row per signal and the next actions, fit for
a GitHub Actions job summary (``--markdown "$GITHUB_STEP_SUMMARY"``), a GitLab merge-request note or a
pull-request comment. GitHub-flavoured Markdown tables; cell text has ``|`` escaped and newlines
folded, so a message cannot break the table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .cells import figure, verdict

#: the mark in front of a signal's row, by what it did
_MARK = {
    "pass": "✅",
    "promote": "✅",
    "inconclusive": "❔",
    "hold": "⚠️",
    "rollback": "❌",
    "not evaluated": "⚪",
}


def _cell(value: Any) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _marked(mark: str, text: str) -> str:
    return f"{mark} {text}" if mark else text


def gate_markdown(report: Mapping[str, Any]) -> str:
    """The Markdown summary of a gate report."""
    decision = str(report["decision"])
    matched = report.get("join", {}).get("matched")
    lines = [
        f"### tickgate gate: {_marked(_MARK.get(decision, ''), f'**{decision}**')} (exit {report['exit_code']})",
        "",
        _cell(report["summary"]) + (f" — {matched} matched requests" if matched is not None else ""),
        "",
        "| signal | result | baseline | candidate | delta | threshold | message |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for signal in report["signals"]:
        shown = verdict(signal)
        mark = "" if signal.get("dry_run") and shown != "pass" else _MARK.get(shown, "")
        unit = f" {signal['unit']}" if signal.get("unit") else ""
        lines.append(
            f"| {_cell(signal['id'])} | {_marked(mark, shown)} | {figure(signal.get('baseline'))} | "
            f"{figure(signal.get('candidate'))} | {figure(signal.get('delta'))} | "
            f"{figure(signal.get('threshold'))}{unit} | {_cell(signal.get('message') or '')} |"
        )
    triage = report.get("triage", [])
    if triage:
        lines += ["", "**Next actions**", ""]
        lines += [
            f"- {_cell(item['signal'])} ({'dry run: ' if item.get('dry_run') else ''}{item['status']}): "
            f"{_cell(item['next_action'])}"
            for item in triage
        ]
    notes = report.get("notes", [])
    if notes:
        lines += ["", *(f"> {_cell(note)}" for note in notes)]
    inputs = report.get("inputs", {})
    sides = [
        f"{name}: `{_cell(side.get('file'))}` ({_cell(side.get('format'))}, {side.get('requests')} requests)"
        for name in ("baseline", "candidate")
        if isinstance(side := inputs.get(name), Mapping)
    ]
    lines += ["", "<details><summary>Inputs</summary>", ""]
    lines += [f"- {s}" for s in sides]
    lines += [f"- policy: `{_cell(inputs.get('policy'))}`, seed {inputs.get('seed')}", "", "</details>"]
    return "\n".join(lines) + "\n"
