"""Vega-Lite chart specifications, rendered to static SVG by vl-convert.

Why Vega-Lite through vl-convert (docs/html.md): Vega-Lite is a declarative
grammar kept by the UW Interactive Data Lab with a stable, versioned JSON
format, so a chart here is a plain dict, not drawing code; vl-convert
(``vl-convert-python`` on PyPI, by the Vega project) embeds the Vega and
Vega-Lite JavaScript and a V8 engine in one compiled wheel and turns a spec
into SVG at build time with no browser and no network. The page then holds
the SVG inline: no script runs when it is viewed, nothing is fetched, and
the file opens the same in any browser, offline, years later. The price is
no interactivity (tooltips, zoom); the tables under the charts carry the
figures.

The specs pin the Vega-Lite version and the number locale and allow no
external data (``allowed_base_urls=[]``), so a report renders to the same
SVG every time with the same vl-convert.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..util.errors import TickgateError

#: the Vega-Lite version the specs are written for (one vl-convert bundles)
VEGA_LITE = "6.4"
WIDTH = 720
HEIGHT = 180
#: the colours of the charts (Tableau 10, Vega's default scheme), by role
COLOURS = {
    "max": "#f28e2b",
    "mean": "#4e79a7",
    "pass": "#59a14f",
    "inconclusive": "#edc948",
    "hold": "#f28e2b",
    "rollback": "#e15759",
    "front": "#e15759",
    "other": "#bab0ac",
}

_EXTRA = "pip install 'tickgate[html]'"


def available() -> bool:
    """Whether the optional ``html`` extra (vl-convert) is installed."""
    try:
        import vl_convert  # noqa: F401
    except ImportError:
        return False
    return True


def missing_extra() -> TickgateError:
    return TickgateError(f"tickgate report --html needs the 'html' extra (vl-convert-python): {_EXTRA}")


def render(spec: dict[str, Any]) -> str:
    """The SVG of a Vega-Lite spec (vl-convert, imported only here: an optional extra)."""
    try:
        import vl_convert
    except ImportError:
        raise missing_extra() from None
    try:
        return str(
            vl_convert.vegalite_to_svg(
                spec,
                vl_version=VEGA_LITE,
                allowed_base_urls=[],
                format_locale="en-US",
                time_format_locale="en-US",
            )
        )
    except ValueError as exc:  # pragma: no cover - a spec of ours Vega-Lite refuses: a bug
        raise RuntimeError(f"vl-convert refused a chart: {exc}") from exc


def _base(
    title: str, rows: list[dict[str, Any]], *, width: int = WIDTH, height: int = HEIGHT
) -> dict[str, Any]:
    return {
        "title": {"text": title, "anchor": "start"},
        "width": width,
        "height": height,
        "data": {"values": rows},
        "config": {"font": "sans-serif", "view": {"stroke": "#ddd"}},
    }


def over_time(
    title: str, x_title: str, xs: list[float], columns: dict[str, list[float]], y_title: str
) -> dict[str, Any]:
    """Lines over time, one per column (``max``, ``mean``), in the column order given."""
    rows = [
        {"x": x, "value": values[i], "of": name} for name, values in columns.items() for i, x in enumerate(xs)
    ]
    names = list(columns)
    spec = _base(title, rows)
    spec.update(
        {
            "mark": {"type": "line", "interpolate": "step-after", "strokeWidth": 1.5},
            "encoding": {
                "x": {"field": "x", "type": "quantitative", "title": x_title},
                "y": {"field": "value", "type": "quantitative", "title": y_title},
                "color": {
                    "field": "of",
                    "type": "nominal",
                    "title": None,
                    "sort": names,
                    "scale": {"domain": names, "range": [COLOURS.get(n, COLOURS["other"]) for n in names]},
                },
            },
        }
    )
    return spec


def quantiles(title: str, blocks: dict[str, dict[str, Any]], unit: str) -> dict[str, Any]:
    """Each distribution's p50/p90/p95/p99/max as bars, one panel per distribution
    (independent y scales: TTFT and inter-token gaps differ by orders of magnitude)."""
    order = ["p50", "p90", "p95", "p99", "max"]
    rows = [
        {"of": name, "q": q, "value": block[q]}
        for name, block in blocks.items()
        for q in order
        if isinstance(block.get(q), (int, float))
    ]
    return {
        "title": {"text": title, "anchor": "start"},
        "data": {"values": rows},
        "config": {"font": "sans-serif", "view": {"stroke": "#ddd"}},
        "facet": {"column": {"field": "of", "type": "nominal", "title": None, "sort": list(blocks)}},
        "resolve": {"scale": {"y": "independent"}},
        "spec": {
            "width": 200,
            "height": HEIGHT,
            "layer": [
                {
                    "mark": {"type": "bar", "color": COLOURS["mean"]},
                    "encoding": {
                        "x": {"field": "q", "type": "ordinal", "sort": order, "title": None},
                        "y": {"field": "value", "type": "quantitative", "title": unit},
                    },
                },
                {
                    "mark": {"type": "text", "dy": -6, "fontSize": 10},
                    "encoding": {
                        "x": {"field": "q", "type": "ordinal", "sort": order},
                        "y": {"field": "value", "type": "quantitative"},
                        "text": {"field": "value", "type": "quantitative", "format": ",.1f"},
                    },
                },
            ],
        },
    }


def grouped_bars(
    title: str, categories: list[str], series: dict[str, list[float]], y_title: str
) -> dict[str, Any]:
    """Bars per category (replica), one bar per series side by side."""
    rows = [
        {"category": c, "of": name, "value": values[i]}
        for name, values in series.items()
        for i, c in enumerate(categories)
    ]
    names = list(series)
    palette = ["#4e79a7", "#59a14f", "#f28e2b", "#76b7b2"]
    spec = _base(title, rows, height=HEIGHT)
    spec.update(
        {
            "mark": "bar",
            "encoding": {
                "x": {
                    "field": "category",
                    "type": "nominal",
                    "sort": categories,
                    "title": None,
                    "axis": {"labelAngle": 0},
                },
                "xOffset": {"field": "of", "type": "nominal", "sort": names},
                "y": {"field": "value", "type": "quantitative", "title": y_title},
                "color": {
                    "field": "of",
                    "type": "nominal",
                    "title": None,
                    "sort": names,
                    "scale": {"domain": names, "range": palette[: len(names)]},
                },
            },
        }
    )
    return spec


def intervals(title: str, rows: list[dict[str, Any]], x_title: str) -> dict[str, Any]:
    """Gate signals: a point at each delta, a rule over its confidence interval, a tick at
    its threshold; coloured by status. ``rows``: signal, delta, lo, hi, threshold, status."""
    statuses = sorted({r["status"] for r in rows})
    colour = {
        "field": "status",
        "type": "nominal",
        "title": None,
        "scale": {"domain": statuses, "range": [COLOURS.get(s, COLOURS["other"]) for s in statuses]},
    }
    y = {"field": "signal", "type": "nominal", "title": None, "sort": [r["signal"] for r in rows]}
    spec = _base(title, rows, height=max(40, 28 * len(rows)))
    spec["layer"] = [
        {
            "mark": {"type": "rule", "strokeWidth": 3},
            "transform": [{"filter": "datum.lo != null"}],
            "encoding": {
                "y": y,
                "x": {"field": "lo", "type": "quantitative", "title": x_title},
                "x2": {"field": "hi"},
                "color": colour,
            },
        },
        {
            "mark": {"type": "tick", "color": "#333", "thickness": 2},
            "transform": [{"filter": "datum.threshold != null"}],
            "encoding": {"y": y, "x": {"field": "threshold", "type": "quantitative"}},
        },
        {
            "mark": {"type": "point", "filled": True, "size": 80},
            "encoding": {"y": y, "x": {"field": "delta", "type": "quantitative"}, "color": colour},
        },
        {
            "mark": {"type": "rule", "color": "#999", "strokeDash": [4, 3]},
            "data": {"values": [{"zero": 0}]},
            "encoding": {"x": {"field": "zero", "type": "quantitative"}},
        },
    ]
    return spec


def pareto(title: str, points: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sweep points: p99 TTFT against output throughput, the front joined by a line.
    ``points``: id, ttft, throughput, front ("on the front" or "dominated"), label."""
    rows = list(points)
    spec = _base(title, rows, height=320)
    x = {"field": "ttft", "type": "quantitative", "title": "TTFT p99 (ms)", "scale": {"zero": False}}
    y = {"field": "throughput", "type": "quantitative", "title": "output tokens/s", "scale": {"zero": False}}
    spec["layer"] = [
        {
            "mark": {"type": "line", "color": COLOURS["front"], "strokeWidth": 1.5},
            "transform": [{"filter": "datum.front == 'on the front'"}],
            "encoding": {"x": x, "y": y, "order": {"field": "ttft"}},
        },
        {
            "mark": {"type": "point", "filled": True, "size": 70},
            "encoding": {
                "x": x,
                "y": y,
                "color": {
                    "field": "front",
                    "type": "nominal",
                    "title": None,
                    "scale": {
                        "domain": ["on the front", "dominated"],
                        "range": [COLOURS["front"], COLOURS["mean"]],
                    },
                },
            },
        },
        {
            "mark": {"type": "text", "dx": 8, "align": "left", "fontSize": 10},
            "encoding": {"x": x, "y": y, "text": {"field": "label"}},
        },
    ]
    return spec


#: the state bands of a pool's replicas, bottom up, and their colours
REPLICA_STATES = (("ready", "#4e79a7"), ("starting", "#f28e2b"), ("draining", "#bab0ac"))
POOL_COLOURS = ["#4e79a7", "#e15759", "#59a14f", "#b07aa1", "#76b7b2", "#edc948"]
PANEL_HEIGHT = 120


def stacked_in_time(title: str, end_s: float, panels: list[dict[str, Any]]) -> dict[str, Any]:
    """Panels one above the other on one time axis: every panel's ``x`` is the same
    field, scale domain ``[0, end_s]`` and a shared scale, so a moment is one vertical
    line through all of them (the arrival that made a decision, the replicas it asked
    for, the latency before and after). Each panel is a unit or layer spec whose
    encodings use ``t`` (seconds) for x; the axis is titled under the last one only."""
    stacked = []
    for i, panel in enumerate(panels):
        x = {
            "field": "t",
            "type": "quantitative",
            "scale": {"domain": [0, end_s], "nice": False},
            "title": "time (s)" if i == len(panels) - 1 else None,
        }
        layers = panel.get("layer", [panel])
        for layer in layers:
            layer.setdefault("encoding", {})["x"] = x
        stacked.append({"width": WIDTH, "height": PANEL_HEIGHT, **panel})
    return {
        "title": {"text": title, "anchor": "start"},
        "config": {"font": "sans-serif", "view": {"stroke": "#ddd"}},
        "vconcat": stacked,
        # one x for all; colours are each panel's own (pools in one, replica states in another)
        "resolve": {"scale": {"x": "shared", "color": "independent"}, "legend": {"color": "independent"}},
        "spacing": 14,
    }


def pool_lines(title: str, rows: list[dict[str, Any]], pools: list[str], y_title: str) -> dict[str, Any]:
    """A panel of :func:`stacked_in_time`: one line per pool through ``rows`` (``t``,
    ``pool``, ``value``; a null value breaks the line: nothing was measured there)."""
    colour: dict[str, Any] = {
        "field": "pool",
        "type": "nominal",
        "title": "pool",
        "sort": pools,
        "scale": {"domain": pools, "range": [POOL_COLOURS[i % len(POOL_COLOURS)] for i in range(len(pools))]},
    }
    if len(pools) == 1:
        colour = {"value": POOL_COLOURS[0]}
    return {
        "title": {"text": title, "anchor": "start", "fontSize": 12},
        "data": {"values": rows},
        "mark": {"type": "line", "strokeWidth": 1.5, "point": {"size": 12}},
        "encoding": {"y": {"field": "value", "type": "quantitative", "title": y_title}, "color": colour},
    }


def replica_bands(title: str, bands: list[dict[str, Any]], desired: list[dict[str, Any]]) -> dict[str, Any]:
    """A panel of :func:`stacked_in_time`: one pool's replicas by state as stacked steps
    (``bands``: ``t``, ``state``, ``n`` at every change) and what the autoscaler asked
    for as a dashed step line over them (``desired``: ``t``, ``n``)."""
    names = [s for s, _ in REPLICA_STATES]
    return {
        "title": {"text": title, "anchor": "start", "fontSize": 12},
        "layer": [
            {
                "data": {"values": bands},
                "mark": {"type": "area", "interpolate": "step-after", "opacity": 0.85},
                "encoding": {
                    "y": {"field": "n", "type": "quantitative", "stack": "zero", "title": "replicas"},
                    "color": {
                        "field": "state",
                        "type": "nominal",
                        "title": None,
                        "sort": names,
                        "scale": {
                            "domain": [*names, "desired"],
                            "range": [c for _, c in REPLICA_STATES] + ["#222"],
                        },
                    },
                    "order": {"field": "order", "type": "quantitative"},
                },
            },
            {
                "data": {"values": desired},
                "mark": {
                    "type": "line",
                    "interpolate": "step-after",
                    "strokeDash": [5, 3],
                    "strokeWidth": 1.5,
                },
                "encoding": {
                    "y": {"field": "n", "type": "quantitative"},
                    "color": {"datum": "desired"},
                },
            },
        ],
    }
