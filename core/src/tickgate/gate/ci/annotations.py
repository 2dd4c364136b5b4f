"""The gate report as GitHub Actions annotations: workflow commands on stdout (``::error``,
``::warning``, ``::notice``) that GitHub shows on the run and its summary, printed by ``tickgate
gate`` when ``GITHUB_ACTIONS=true`` (GitHub sets it in every job).

A signal that rolls back is an error, one that holds or is inconclusive a warning (dry-run ones as notices), and the
decision a notice or the same level as its worst signal. The command format and its escapes follow
GitHub's "Workflow commands for GitHub Actions": in a message ``%``, CR and LF are escaped as ``%25``,
``%0D``, ``%0A``; in a property also ``:`` and ``,`` (``%3A``, ``%2C``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .cells import figures

_LEVEL = {"rollback": "error", "hold": "warning", "inconclusive": "warning", "promote": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """True inside a GitHub Actions job."""
    return (os.environ if environ is None else environ).get("GITHUB_ACTIONS") == "true"


def workflow_commands(report: Mapping[str, Any]) -> list[str]:
    """One workflow command per failed signal (the triage, worst first), then the decision."""
    out = []
    for item in report.get("triage", []):
        signal = next((s for s in report["signals"] if s["id"] == item["signal"]), item)
        level = "notice" if item.get("dry_run") else _LEVEL[item["status"]]
        title = (
            f"tickgate gate: {item['signal']} {'dry run: ' if item.get('dry_run') else ''}{item['status']}"
        )
        body = f"{item['message']}\n{figures(signal)}\nnext: {item['next_action']}"
        out.append(f"::{level} title={_property(title)}::{_data(body)}")
    decision = str(report["decision"])
    out.append(
        f"::{_LEVEL.get(decision, 'warning')} title={_property(f'tickgate gate: {decision}')}::"
        f"{_data(str(report['summary']))}"
    )
    return out
