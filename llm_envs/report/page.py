"""The page around a report's sections: one HTML file with its CSS, script and data inlined.

Everything the page needs is inside the file: the stylesheet and script (``assets/``), the
charts (inline SVG), and the data the script reads (one ``<script type="application/json">``
block). The page loads nothing else: no fonts, no scripts, no images from anywhere.

Episodes are the heavy part. Each is stored as gzip-compressed JSON in base64 and unpacked by the
browser (``DecompressionStream``) only when the episode is opened or searched, so a run of
thousands of long conversations opens as fast as its list of rows. Text from runs (actions,
prompts, sandbox output) is only ever put into the page as text, never as markup.
"""

from __future__ import annotations

import base64
import gzip
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from html import escape
from importlib import resources
from typing import Any

from llm_envs.core.writing import json_text

__all__ = ["esc", "fmt", "fmt_interval", "notes_html", "pack", "render_page", "table", "to_float", "to_json"]


def esc(value: Any) -> str:
    """Text as HTML (quotes escaped too, so it is safe inside attributes)."""
    return escape(str(value), quote=True)


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table cell; ``-`` for missing or non-finite values."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 10 ** -digits):
            return f"{value:.{max(1, digits - 1)}e}"
        return f"{value:.{digits}f}"
    return "-" if value is None else str(value)


def fmt_interval(data: Mapping[str, Any] | None, digits: int = 3) -> str:
    """``value [low, high]`` from an interval dict; tolerant of missing keys."""
    if not isinstance(data, Mapping) or data.get("value") is None:
        return "-"
    value = fmt(to_float(data.get("value")), digits)
    low, high = to_float(data.get("low")), to_float(data.get("high"))
    if math.isfinite(low) and math.isfinite(high):
        return f"{value} [{fmt(low, digits)}, {fmt(high, digits)}]"
    return value


def to_float(value: Any) -> float:
    """A number from run data, NaN when it is missing or not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def notes_html(notes: Sequence[str]) -> str:
    """Warnings about the data (an interrupted run, lines that could not be read)."""
    return "".join(f'<p class="warning">{esc(n)}</p>' for n in notes)


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, cls: str = "", raw: bool = False,
          numeric_from: int = 1) -> str:
    """An HTML table. Cells are escaped unless ``raw`` (then they are trusted HTML from this
    package). Columns from ``numeric_from`` on are right-aligned."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            text = cell if raw else esc(cell)
            cells.append(f'<td class="num">{text}</td>' if i >= numeric_from else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _finite(data: Any) -> Any:
    """``data`` with every float that is not finite (NaN, infinity) as ``None``: JSON has no
    such number, and one ``-Infinity`` in a chunk made the browser's ``JSON.parse`` refuse all of
    its episodes (and ``allow_nan=False`` refuse the whole page)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(value) for value in data]
    return data


def to_json(data: Any) -> str:
    """Compact JSON (numbers that are not finite become ``null``; other values JSON cannot hold
    become their ``repr``)."""
    return json_text(_finite(data), separators=(",", ":"), default=repr)


def pack(data: Any = None, *, text: str | None = None) -> str:
    """JSON (or JSON ``text`` already encoded), gzip-compressed (deterministically), as base64:
    how episodes travel in the page."""
    raw = (to_json(data) if text is None else text).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def _asset(name: str) -> str:
    return resources.files("llm_envs.report").joinpath("assets", name).read_text(encoding="utf-8")


def _json_for_script(data: Any) -> str:
    # Inside <script>, only "</script" or "<!--" could end the block early; escaping every "<"
    # rules both out, whatever text the runs contain.
    text = json_text(_finite(data), separators=(",", ":"), default=repr, allow_nan=False)
    return text.replace("<", "\\u003c")


def render_page(title: str, kind: str, sections: Sequence[tuple[str, str, str]], data: Mapping[str, Any],
                *, subtitle: str = "") -> str:
    """The whole page. ``sections`` are ``(anchor, heading, html)``; ``data`` is what the script
    reads (episode datasets, pairs)."""
    from llm_envs import __version__ as version

    nav = "".join(f'<a href="#{esc(anchor)}">{esc(heading)}</a>' for anchor, heading, _ in sections)
    body = "".join(
        f'<section id="{esc(anchor)}"><h2>{esc(heading)}</h2>{html}</section>' for anchor, heading, html in sections
    )
    created = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No request may leave the page: scripts and styles inline only, no fetch, no images.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{_asset('report.css')}</style></head>"
        f'<body data-kind="{esc(kind)}">'
        f'<header><h1>{esc(title)}</h1><div class="subtitle">{esc(subtitle)}</div>'
        f"<nav>{nav}</nav></header>"
        "<noscript><p class=\"warning\">The episode lists need JavaScript; the tables and charts "
        "do not.</p></noscript>"
        f"<main>{body}</main>"
        f'<footer>llm-envs {esc(version)} report, written {esc(created)}. One self-contained file: '
        "it loads nothing from anywhere.</footer>"
        f'<script type="application/json" id="report-data">{_json_for_script(data)}</script>'
        f"<script>{_asset('report.js')}</script>"
        "</body></html>\n"
    )
