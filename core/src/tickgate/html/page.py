"""One self-contained HTML page: inline CSS, inline SVG charts, tables, no script.

The Content-Security-Policy meta tag (``default-src 'none'``, inline styles
only) is a promise the browser keeps: the page can fetch nothing -- no
script, font, image or stylesheet from anywhere -- so it opens offline and
leaks nothing about who opened it. Everything is escaped with
:func:`html.escape`; nothing depends on the clock, so the same input gives
the same bytes.
"""

from __future__ import annotations

import html
import math
from typing import Any

import attrs

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1100px;
color:#222;padding:0 16px}
h1{font-size:1.5em;margin-bottom:4px}
h2{font-size:1.2em;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#666;margin-top:0}.note{color:#555;font-size:.9em}
figure.chart{margin:12px 0;overflow-x:auto}figure.chart svg{max-width:100%;height:auto}
table{border-collapse:collapse;margin:8px 0;font-size:.88em}
caption{text-align:left;font-weight:600;padding:4px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}td.n{text-align:right;
font-variant-numeric:tabular-nums}th{background:#f5f5f5;overflow-wrap:anywhere}
.badge{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:600}
.pass,.promote{background:#59a14f}.inconclusive{background:#c9a227}.hold{background:#e8891f}.rollback{background:#e15759}
.other{background:#888}
""".strip()


@attrs.define
class Table:
    caption: str
    header: list[str]
    rows: list[list[Any]]


@attrs.define
class Section:
    title: str
    notes: list[str] = attrs.Factory(list)
    charts: list[tuple[str, str]] = attrs.Factory(list)  # (name, svg)
    tables: list[Table] = attrs.Factory(list)
    badge: tuple[str, str] | None = None  # (css class, text)


def fmt(value: Any) -> str:
    """A cell's text: integers with separators, floats to 3 decimals, null as a dash."""
    if value is None:
        return "\u2013"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:,.3f}".rstrip("0").rstrip(".")
    return str(value)


def _table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = []
    for row in t.rows:
        cells = []
        for v in row:
            cls = ' class="n"' if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
            cells.append(f"<td{cls}>{html.escape(fmt(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f"<table><caption>{html.escape(t.caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def render_page(title: str, subtitle: str, sections: list[Section]) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="sub">{html.escape(subtitle)}</p>',
    ]
    for s in sections:
        parts.append(f"<section><h2>{html.escape(s.title)}</h2>")
        if s.badge is not None:
            css, text = (html.escape(x) for x in s.badge)
            parts.append(f'<p><span class="badge {css}">{text}</span></p>')
        for note in s.notes:
            parts.append(f'<p class="note">{html.escape(note)}</p>')
        for name, svg in s.charts:
            parts.append(f'<figure class="chart" data-chart="{html.escape(name)}">{_inline(svg)}</figure>')
        for t in s.tables:
            parts.append(_table(t))
        parts.append("</section>")
    parts.append(
        '<p class="note">Written by tickgate report --html; charts: Vega-Lite rendered to SVG by '
        "vl-convert (docs/html.md).</p></body></html>"
    )
    return "\n".join(parts) + "\n"


def _inline(svg: str) -> str:
    """vl-convert's SVG as an element of the page (an XML declaration, if any, dropped)."""
    text = svg.strip()
    if text.startswith("<?xml"):
        text = text[text.index("?>") + 2 :].lstrip()
    return text
