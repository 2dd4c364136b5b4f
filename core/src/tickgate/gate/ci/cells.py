"""How the CI outputs show a signal: its figures as text, the same in every format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def figure(value: Any) -> str:
    """A figure as the report has it (rounded there to 6 decimals, shown as it is, so the CI
    outputs and the JSON agree digit for digit): ``-`` when absent."""
    return "-" if value is None else str(value)


def verdict(signal: Mapping[str, Any]) -> str:
    """What the signal did to the decision: ``pass``, ``hold``, ``rollback``, ``not evaluated``,
    or ``dry run: <status>`` for a signal the policy lets report but not decide."""
    status = str(signal["status"]).replace("_", " ")
    return f"dry run: {status}" if signal.get("dry_run") and status != "pass" else status


def figures(signal: Mapping[str, Any]) -> str:
    """``baseline B, candidate C, delta D, threshold T UNIT``: the numbers a failure is judged on."""
    unit = f" {signal['unit']}" if signal.get("unit") else ""
    return (
        f"baseline {figure(signal.get('baseline'))}, candidate {figure(signal.get('candidate'))}, "
        f"delta {figure(signal.get('delta'))}, threshold {figure(signal.get('threshold'))}{unit}"
    )
