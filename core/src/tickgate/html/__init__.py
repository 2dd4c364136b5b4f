"""``tickgate report --html``: one self-contained HTML page per replay, fleet
replay, gate or sweep (docs/html.md).

:func:`build` reads and checks the input (:mod:`.inputs`), lays out its
sections (:mod:`.views`), renders the charts to SVG (:mod:`.charts`, the
optional ``html`` extra) and returns the page (:mod:`.page`); the caller
writes it atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import autoscaling, inputs, views
from .page import render_page

TITLES = {
    "replay": "tickgate replay report",
    "fleet": "tickgate fleet replay report",
    "gate": "tickgate gate report",
    "sweep": "tickgate sweep",
}


def build(path: Path) -> tuple[str, str]:
    """``(kind, page)`` for the report, gate report or sweep at ``path``; nothing is
    drawn (no chart rendered) before the input has passed its checks."""
    kind, data = inputs.load(path)
    check_available()  # after the input's checks: a bad file is named first, extra or not
    named = path.parent if kind == "sweep" and not path.is_dir() else path  # a sweep by its directory
    return kind, page(kind, data, label=named.resolve().name)


def page(kind: str, data: Any, *, label: str) -> str:
    """The page of checked input ``data`` (see :func:`tickgate.html.inputs.load`)."""
    if kind in ("replay", "fleet"):
        sections = views.replay_sections(data)
        if kind == "fleet":
            # a fleet's steps are its engines': their series in place of the fleet's own
            over_time = 1 if "series" in data or data.get("ticks") else 2
            sections[1:over_time] = views.fleet_sections(data)
        # an autoscaled fleet's scaling and a report's cost: after the summary, before the rest
        extra = autoscaling.autoscaling_sections(data["autoscaling"]) if "autoscaling" in data else []
        if "cost" in data:
            extra.append(autoscaling.cost_section(data["cost"]))
        sections[1:1] = extra
        ins = data.get("inputs") or {}
        subtitle = " \u00b7 ".join(str(x) for x in (label, ins.get("workload"), ins.get("policy")) if x)
    elif kind == "gate":
        sections = views.gate_sections(data)
        subtitle = label
    else:
        sections = views.sweep_sections(data)
        subtitle = label
    return render_page(TITLES[kind], subtitle, sections)


def check_available() -> None:
    """Fail before any work when the charting extra is missing (one line naming it)."""
    from .charts import available, missing_extra

    if not available():
        raise missing_extra()
