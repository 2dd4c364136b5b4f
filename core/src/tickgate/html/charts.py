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
