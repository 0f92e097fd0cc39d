"""The page around a report's sections: one HTML file with its CSS, script and data inlined.

Everything the page needs is inside the file: the stylesheet and script (``assets/``), the
charts (inline SVG), and the data the script reads (one ``<script type="application/json">``
block). The page loads nothing else: no fonts, no scripts, no images from anywhere.

Episodes are the heavy part. Each is stored as gzip-compressed JSON in base64 and unpacked by the
browser (``DecompressionStream``) only when the episode is opened or searched, so a run of
thousands of long conversations opens as fast as its list of rows. Text from runs (actions,
prompts, sandbox output) is only ever put into the page as text, never as markup.

Run text inside the page's own sentences is *isolated* (:func:`isolated`): a run's text can hold
bidirectional controls (U+202E reverses what follows it) or right-to-left letters, and without
isolation they reorder the report's words around it (an INCOMPLETE banner read backwards).
:func:`esc` writes each isolate as a ``<bdi>`` element; where the page can hold only plain text
(the ``<title>``, attributes, ``<option>``, SVG text) the isolate characters themselves stay
(:func:`esc_attr`). Lone surrogates (a file name's undecodable byte, a model's broken text) are
written as U+FFFD, so that every page encodes as UTF-8.
"""

from __future__ import annotations

import base64
import gzip
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from html import escape
from importlib import resources
from typing import Any

from llm_envs.core.writing import json_text, without_lone_surrogates

__all__ = ["esc", "esc_attr", "fmt", "fmt_interval", "isolated", "json_for_reading", "notes_html", "pack",
           "render_page", "table", "to_float", "to_json"]

# The isolate initiators (LRI, RLI, FSI) with the direction their <bdi> gets, and PDI, which ends one.
_ISOLATE_OPENERS = {"\u2066": ' dir="ltr"', "\u2067": ' dir="rtl"', "\u2068": ""}
_PDI = "\u2069"
_ISOLATE_CHARS = re.compile("[\u2066-\u2069]")
# The bidirectional embeddings, overrides and isolates (U+202A-202E, U+2066-2069).
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


def isolated(value: Any) -> str:
    """``str(value)`` as one bidi isolate (FSI, the text, PDI), for run text that goes inside a
    sentence of the report: whatever the text holds (an override U+202E, right-to-left letters),
    it cannot reorder the words around it. Its own isolates are balanced first (a PDI that would
    end the outer isolate early is dropped; one left open is closed), and the closing PDI ends
    every embedding and override inside. ASCII text is returned as it is: it holds no
    right-to-left letter and no bidi control, so it cannot reorder anything."""
    text = str(value)
    if text.isascii():
        return text
    depth, kept = 0, []
    for char in text:
        if char in _ISOLATE_OPENERS:
            depth += 1
        elif char == _PDI:
            if not depth:
                continue
            depth -= 1
        kept.append(char)
    return "\u2068" + "".join(kept) + _PDI * depth + _PDI


def esc_attr(value: Any) -> str:
    """Text as HTML for places that hold only plain text: attributes, ``<title>``, ``<option>``
    (quotes escaped, isolates kept as characters)."""
    return escape(str(value), quote=True)


def esc(value: Any) -> str:
    """Text as HTML element content (quotes escaped too), each bidi isolate (FSI, LRI or RLI to
    its PDI; see :func:`isolated`) written as a ``<bdi>`` element (``dir`` from LRI or RLI), one
    left open closed at the end: the browser isolates an element whatever its text holds."""
    text = escape(str(value), quote=True)
    if not _ISOLATE_CHARS.search(text):
        return text
    out, depth = [], 0
    for char in text:
        if char in _ISOLATE_OPENERS:
            out.append(f"<bdi{_ISOLATE_OPENERS[char]}>")
            depth += 1
        elif char == _PDI and depth:
            out.append("</bdi>")
            depth -= 1
        elif char != _PDI:  # a PDI that closes nothing does nothing (Unicode's bidi algorithm)
            out.append(char)
    return "".join(out) + "</bdi>" * depth


def json_for_reading(data: Any) -> str:
    """``data`` as indented JSON for a person to read on the page, bidi controls inside its
    strings written as JSON escapes (``\\u202e``): still the same JSON, but a control in one
    value cannot reorder the rest of its line."""
    text = json_text(data, indent=1, default=repr)
    return _BIDI_CONTROLS.sub(lambda m: "\\u%04x" % ord(m.group()), text)


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table cell; ``-`` for missing or non-finite values; anything else as
    :func:`isolated` text."""
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
    # Not a number (a hand-edited file): shown as the run's text, isolated in the sentence.
    return "-" if value is None else isolated(value)


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
    """The whole page. ``title`` and ``subtitle`` are text (run text in them :func:`isolated`);
    ``sections`` are ``(anchor, heading, html)``; ``data`` is what the script reads (episode
    datasets, pairs). Every lone surrogate in the page is written as U+FFFD."""
    from llm_envs import __version__ as version

    nav = "".join(f'<a href="#{esc(anchor)}">{esc(heading)}</a>' for anchor, heading, _ in sections)
    body = "".join(
        f'<section id="{esc(anchor)}"><h2>{esc(heading)}</h2>{html}</section>' for anchor, heading, html in sections
    )
    created = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No request may leave the page: scripts and styles inline only, no fetch, no images.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc_attr(title)}</title><style>{_asset('report.css')}</style></head>"
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
    # A lone surrogate (a directory name's undecodable byte in the subtitle, a server's broken
    # error text in a banner) cannot be written as UTF-8: one would cost the whole page. The data
    # block has none (json_text writes them as escapes); the page's own text is cleaned here, once.
    return without_lone_surrogates(page)
