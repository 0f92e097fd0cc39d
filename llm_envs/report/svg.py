"""Small static charts as inline SVG, written directly (no plotting library).

Why not matplotlib or a JavaScript library: a report must open from disk with nothing else
installed, in any browser, and stay light. The charts a report needs are few and plain (lines
over training steps, a stacked area, histograms, stacked bars, dot-and-whisker intervals), so
writing their SVG here costs ~300 lines, needs no optional extra, keeps each chart to a few
kilobytes, renders before any script runs, and leaves every mark in the DOM where a test can
count it. matplotlib's SVG would tie the report to an optional extra and weigh 30-100 kB per
chart; a vendored JS library would add a third-party dependency to keep up to date and draw
nothing until its script ran.

Every function returns an HTML ``<figure class="chart">`` string: the SVG (scaled with its
``viewBox``), an HTML legend, and a caption. Text is escaped, and a name (run text) inside a
tooltip's sentence is isolated (:func:`llm_envs.report.page.isolated`); numbers that are not
finite are left out of the marks (a gap in a line), never drawn as zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from llm_envs.report.page import esc, isolated

__all__ = [
    "PALETTE",
    "Series",
    "bar_chart",
    "histograms",
    "interval_chart",
    "line_chart",
    "nice_ticks",
    "stacked_area_chart",
]

#: Okabe-Ito colours (distinguishable with the common colour-vision deficiencies), then greys.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
           "#7f7f7f", "#b07aa1")
DASHES = ("", "6 3", "2 2", "8 3 2 3")

WIDTH, HEIGHT = 480, 250
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 14, 12, 40
# A line with more points than this is thinned (evenly, the last point kept) before drawing.
MAX_POINTS = 600


@dataclass
class Series:
    """One line (or band) of a chart: ``points`` are ``(x, y)``; ``None`` or NaN ``y`` is a gap."""

    name: str
    points: list[tuple[float, float | None]] = field(default_factory=list)
    color: str | None = None
    dash: str = ""


# ---------------------------------------------------------------------------- scales
def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values (steps of 1, 2 or 5 times a power of ten) covering
    ``[low, high]``."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0]
    if high < low:
        low, high = high, low
    if high == low:
        pad = abs(low) * 0.5 or 1.0
        low, high = low - pad, high + pad
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    start = math.floor(low / step + 1e-9) * step
    ticks = []
    value = start
    while value <= high + step * 1e-9:
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        value += step
    if ticks[-1] < high:
        ticks.append(ticks[-1] + step)
    return ticks


def _fmt(value: float) -> str:
    """A tick or value label: at most 4 significant digits, no trailing zeros."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e5 or magnitude < 1e-3:
        return f"{value:.2g}"
    text = f"{value:.4g}"
    return text


class _Frame:
    """The plotting area of one chart and its two linear scales."""

    def __init__(self, x_range: tuple[float, float], y_range: tuple[float, float],
                 width: int = WIDTH, height: int = HEIGHT, bottom_margin: int = MARGIN_BOTTOM) -> None:
        self.width, self.height = width, height
        self.x0, self.x1 = x_range if x_range[0] != x_range[1] else (x_range[0] - 0.5, x_range[1] + 0.5)
        self.y0, self.y1 = y_range if y_range[0] != y_range[1] else (y_range[0] - 0.5, y_range[1] + 0.5)
        self.left, self.right = MARGIN_LEFT, width - MARGIN_RIGHT
        self.top, self.bottom = MARGIN_TOP, height - bottom_margin

    def x(self, value: float) -> float:
        return self.left + (value - self.x0) / (self.x1 - self.x0) * (self.right - self.left)

    def y(self, value: float) -> float:
        return self.bottom - (value - self.y0) / (self.y1 - self.y0) * (self.bottom - self.top)

    def axes(self, x_ticks: Sequence[float] | None, y_ticks: Sequence[float], x_label: str, y_label: str,
             x_tick_labels: Sequence[str] | None = None) -> list[str]:
        out = [f'<rect class="plot-area" x="{self.left}" y="{self.top}" width="{self.right - self.left}" '
               f'height="{self.bottom - self.top}"/>']
        for tick in y_ticks:
            y = self.y(tick)
            out.append(f'<line class="grid" x1="{self.left}" x2="{self.right}" y1="{y:.1f}" y2="{y:.1f}"/>')
            out.append(f'<text class="tick" x="{self.left - 5}" y="{y + 3.5:.1f}" text-anchor="end">'
                       f"{escape(_fmt(tick))}</text>")
        if x_ticks is not None:
            labels = x_tick_labels or [_fmt(t) for t in x_ticks]
            for tick, label in zip(x_ticks, labels):
                x = self.x(tick)
                out.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{self.bottom}" y2="{self.bottom + 4}"/>')
                out.append(f'<text class="tick" x="{x:.1f}" y="{self.bottom + 15}" text-anchor="middle">'
                           f"{escape(label)}</text>")
        out.append(f'<line class="axis" x1="{self.left}" x2="{self.right}" y1="{self.bottom}" y2="{self.bottom}"/>')
        if x_label:
            out.append(f'<text class="label" x="{(self.left + self.right) / 2:.1f}" y="{self.height - 6}" '
                       f'text-anchor="middle">{escape(x_label)}</text>')
        if y_label:
            cy = (self.top + self.bottom) / 2
            out.append(f'<text class="label" transform="translate(13 {cy:.1f}) rotate(-90)" '
                       f'text-anchor="middle">{escape(y_label)}</text>')
        return out


def _figure(svg_parts: Sequence[str], title: str, legend: Sequence[tuple[str, str, str]] = (),
            width: int = WIDTH, height: int = HEIGHT, note: str = "", kind: str = "") -> str:
    """Wrap marks into ``<figure>``: title, SVG, legend ``(name, colour, dash)``, note."""
    legend_html = ""
    if legend:
        items = "".join(
            f'<span class="legend-item"><svg width="22" height="10" aria-hidden="true"><line x1="1" x2="21" '
            f'y1="5" y2="5" stroke="{colour}" stroke-width="3" stroke-dasharray="{dash}"/></svg>'
            f"{esc(name)}</span>"
            for name, colour, dash in legend
        )
        legend_html = f'<div class="legend">{items}</div>'
    note_html = f'<figcaption class="note">{esc(note)}</figcaption>' if note else ""
    return (
        f'<figure class="chart" data-chart="{escape(kind)}"><div class="chart-title">{esc(title)}</div>'
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        + "".join(svg_parts)
        + f"</svg>{legend_html}{note_html}</figure>"
    )


def _finite(value: float | None) -> bool:
    return value is not None and isinstance(value, (int, float)) and math.isfinite(value)


def _thin(points: Sequence[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    if len(points) <= MAX_POINTS:
        return list(points)
    stride = len(points) / MAX_POINTS
    kept = [points[int(i * stride)] for i in range(MAX_POINTS)]
    if kept[-1] is not points[-1]:
        kept.append(points[-1])
    return kept


def _colour(series: Series, i: int) -> str:
    return series.color or PALETTE[i % len(PALETTE)]


def _range(values: Sequence[float], include_zero: bool = False) -> tuple[float, float]:
    finite = [v for v in values if _finite(v)]
    if not finite:
        return (0.0, 1.0)
    low, high = min(finite), max(finite)
    if include_zero:
        low, high = min(low, 0.0), max(high, 0.0)
    return low, high


# ---------------------------------------------------------------------------- charts
def line_chart(series: Sequence[Series], *, title: str, x_label: str = "step", y_label: str = "",
               y_range: tuple[float, float] | None = None, note: str = "") -> str:
    """Lines over a shared x axis (training curves). Points are marked when there are few."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points if _finite(y)]
    if not xs:
        return _figure([f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no data</text>'],
                       title, kind="line")
    y_low, y_high = y_range if y_range is not None else _range(ys)
    y_ticks = nice_ticks(y_low, y_high)
    x_ticks = nice_ticks(min(xs), max(xs))
    x_ticks = [t for t in x_ticks if min(xs) <= t <= max(xs)] or [min(xs)]
    frame = _Frame((min(xs), max(xs)), (min(y_ticks[0], y_low), max(y_ticks[-1], y_high)))
    parts = frame.axes(x_ticks, y_ticks, x_label, y_label)
    legend = []
    for i, s in enumerate(series):
        colour = _colour(s, i)
        points = _thin(s.points)
        path, pen_down = [], False
        for x, y in points:
            if not _finite(y):
                pen_down = False
                continue
            path.append(f"{'L' if pen_down else 'M'}{frame.x(x):.1f} {frame.y(y):.1f}")
            pen_down = True
        parts.append(f'<path class="series" data-series="{escape(s.name)}" d="{" ".join(path)}" fill="none" '
                     f'stroke="{colour}" stroke-width="1.8" stroke-dasharray="{s.dash}"/>')
        finite = [(x, y) for x, y in points if _finite(y)]
        if len(finite) <= 40:
            for x, y in finite:
                parts.append(f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="2.6" fill="{colour}">'
                             f"<title>{escape(isolated(s.name))} @ {escape(_fmt(x))}: {escape(_fmt(y))}</title></circle>")
        legend.append((s.name, colour, s.dash))
    return _figure(parts, title, legend, note=note, kind="line")


def stacked_area_chart(series: Sequence[Series], *, title: str, x_label: str = "step", y_label: str = "",
                       note: str = "") -> str:
    """Series stacked on each other (e.g. seconds per phase of a training step). Missing
    values count as 0 in the stack."""
    xs = sorted({x for s in series for x, _ in s.points})
    if not xs:
        return line_chart([], title=title)
    values = [{x: (y if _finite(y) else 0.0) for x, y in s.points} for s in series]
    if len(xs) > MAX_POINTS:
        xs = [x for x, _ in _thin([(x, 0.0) for x in xs])]
    totals = [sum(v.get(x, 0.0) for v in values) for x in xs]
    y_ticks = nice_ticks(0.0, max(totals) or 1.0)
    frame = _Frame((xs[0], xs[-1]), (0.0, y_ticks[-1]))
    x_ticks = [t for t in nice_ticks(xs[0], xs[-1]) if xs[0] <= t <= xs[-1]] or [xs[0]]
    parts = frame.axes(x_ticks, y_ticks, x_label, y_label)
    base = [0.0] * len(xs)
    legend = []
    for i, (s, v) in enumerate(zip(series, values)):
        colour = _colour(s, i)
        top = [b + v.get(x, 0.0) for b, x in zip(base, xs)]
        if len(xs) == 1:  # one step: a bar segment instead of an area
            x = frame.x(xs[0])
            parts.append(f'<rect class="series" data-series="{escape(s.name)}" x="{x - 12:.1f}" y="{frame.y(top[0]):.1f}" '
                         f'width="24" height="{frame.y(base[0]) - frame.y(top[0]):.1f}" fill="{colour}"/>')
        else:
            upper = " ".join(f"L{frame.x(x):.1f} {frame.y(y):.1f}" for x, y in zip(xs, top))
            lower = " ".join(f"L{frame.x(x):.1f} {frame.y(y):.1f}" for x, y in reversed(list(zip(xs, base))))
            parts.append(f'<path class="series" data-series="{escape(s.name)}" d="M{upper[1:]} {lower} Z" '
                         f'fill="{colour}" fill-opacity="0.8" stroke="none"/>')
        legend.append((s.name, colour, ""))
        base = top
    return _figure(parts, title, legend, note=note, kind="stacked")


def bar_chart(categories: Sequence[str], stacks: Mapping[str, Sequence[float]], *, title: str,
              x_label: str = "", y_label: str = "", colors: Mapping[str, str] | None = None,
              overlay: Series | None = None, overlay_range: tuple[float, float] = (0.0, 1.0),
              note: str = "") -> str:
    """Stacked vertical bars, one per category; ``overlay`` is a line drawn on its own 0-1 scale
    (labelled on the right), its x values being category positions."""
    n = len(categories)
    totals = [sum(values[i] for values in stacks.values()) for i in range(n)]
    y_ticks = nice_ticks(0.0, max(totals, default=0.0) or 1.0)
    frame = _Frame((-0.5, n - 0.5), (0.0, y_ticks[-1]))
    if overlay is not None:
        frame.right -= 26
    step = max(1, math.ceil(n / 14))  # at most ~14 category labels
    ticks = list(range(0, n, step))
    parts = frame.axes(ticks, y_ticks, x_label, y_label, [categories[i] for i in ticks])
    slot = (frame.right - frame.left) / max(1, n)
    bar_width = max(1.0, slot * 0.75)
    base = [0.0] * n
    legend = []
    for j, (name, values) in enumerate(stacks.items()):
        colour = (colors or {}).get(name) or PALETTE[j % len(PALETTE)]
        for i, value in enumerate(values):
            if value <= 0:
                continue
            x = frame.x(i) - bar_width / 2
            y_top, y_base = frame.y(base[i] + value), frame.y(base[i])
            parts.append(f'<rect class="bar" data-series="{escape(name)}" x="{x:.1f}" y="{y_top:.1f}" width="{bar_width:.1f}" '
                         f'height="{y_base - y_top:.1f}" fill="{colour}"><title>{escape(isolated(categories[i]))}: '
                         f"{escape(isolated(name))} {escape(_fmt(value))}</title></rect>")
            base[i] += value
        legend.append((name, colour, ""))
    if overlay is not None:
        low, high = overlay_range
        colour = overlay.color or "#000000"

        def oy(value: float) -> float:
            return frame.bottom - (value - low) / (high - low) * (frame.bottom - frame.top)

        path = " ".join(f"{'M' if k == 0 else 'L'}{frame.x(x):.1f} {oy(y):.1f}"
                        for k, (x, y) in enumerate(p for p in overlay.points if _finite(p[1])))
        parts.append(f'<path class="series overlay" data-series="{escape(overlay.name)}" d="{path}" fill="none" '
                     f'stroke="{colour}" stroke-width="1.8" stroke-dasharray="{overlay.dash}"/>')
        for tick in nice_ticks(low, high, 4):
            if low <= tick <= high:
                parts.append(f'<text class="tick" x="{frame.right + 4}" y="{oy(tick) + 3.5:.1f}">{escape(_fmt(tick))}</text>')
        legend.append((overlay.name + " (right axis)", colour, overlay.dash))
    return _figure(parts, title, legend, note=note, kind="bars")


def histograms(values_by_group: Mapping[str, Sequence[float]], *, title: str, x_label: str = "",
               means: Mapping[str, tuple[float, float, float]] | None = None, note: str = "") -> str:
    """One histogram row per group over a shared x axis (rewards per agent). Few distinct
    values get one bar each; otherwise 20 equal bins. ``means`` draws each group's mean and its
    interval ``(value, low, high)`` over its row."""
    groups = [g for g, vals in values_by_group.items() if any(_finite(v) for v in vals)]
    every = [float(v) for g in groups for v in values_by_group[g] if _finite(v)]
    if not every:
        return line_chart([], title=title)
    distinct = sorted(set(every))
    discrete = len(distinct) <= 12
    low, high = min(every), max(every)
    if len(distinct) == 1:  # every value the same (all rewards 0): a narrow bar on a unit-wide axis
        span = max(1.0, abs(distinct[0]))
        edges = [(distinct[0] - 0.04 * span, distinct[0] + 0.04 * span)]
        x_low, x_high = distinct[0] - span / 2, distinct[0] + span / 2
    elif discrete:
        gaps = [b - a for a, b in zip(distinct, distinct[1:])]
        half = min(gaps) * 0.4
        edges = [(v - half, v + half) for v in distinct]
        x_low, x_high = edges[0][0], edges[-1][1]
    else:
        width = (high - low) / 20
        edges = [(low + i * width, low + (i + 1) * width) for i in range(20)]
        x_low, x_high = edges[0][0], edges[-1][1]
    if means:
        for g in groups:
            if g in means:
                shown = [v for v in means[g][1:] if _finite(v)]
                x_low = min([x_low, *shown])
                x_high = max([x_high, *shown])
    row_height = 58
    height = MARGIN_TOP + MARGIN_BOTTOM + row_height * len(groups)
    frame = _Frame((x_low, x_high), (0.0, 1.0), height=height)
    x_ticks = [t for t in nice_ticks(x_low, x_high) if x_low <= t <= x_high]
    parts = frame.axes(x_ticks, [], x_label, "")
    legend = []
    for j, group in enumerate(groups):
        colour = PALETTE[j % len(PALETTE)]
        values = [float(v) for v in values_by_group[group] if _finite(v)]
        counts = [0] * len(edges)
        for v in values:
            if discrete:
                counts[distinct.index(v)] += 1
            else:
                counts[min(len(edges) - 1, int((v - low) / ((high - low) / 20)))] += 1
        row_bottom = MARGIN_TOP + row_height * (j + 1) - 6
        row_top = row_bottom - row_height + 18
        peak = max(counts) or 1
        parts.append(f'<text class="tick group" x="{frame.left - 5}" y="{row_bottom - 2}" text-anchor="end">'
                     f"{escape(group)}</text>")
        for (e0, e1), count in zip(edges, counts):
            if not count:
                continue
            x0, x1 = frame.x(e0), frame.x(e1)
            h = (row_bottom - row_top) * count / peak
            parts.append(f'<rect class="bar" data-series="{escape(group)}" x="{x0 + 0.5:.1f}" y="{row_bottom - h:.1f}" '
                         f'width="{max(0.8, x1 - x0 - 1):.1f}" height="{h:.1f}" fill="{colour}" fill-opacity="0.75">'
                         f"<title>{escape(isolated(group))}: {count} episode{'s' if count != 1 else ''} in "
                         f"[{escape(_fmt(e0))}, {escape(_fmt(e1))})</title></rect>")
        parts.append(f'<line class="axis" x1="{frame.left}" x2="{frame.right}" y1="{row_bottom}" y2="{row_bottom}"/>')
        if means and group in means and all(_finite(v) for v in means[group]):
            mean, lo, hi = means[group]
            y = row_top - 4
            parts.append(f'<line class="whisker" x1="{frame.x(lo):.1f}" x2="{frame.x(hi):.1f}" y1="{y}" y2="{y}" '
                         f'stroke="{colour}"/><circle cx="{frame.x(mean):.1f}" cy="{y}" r="3" fill="{colour}">'
                         f"<title>{escape(isolated(group))}: mean {escape(_fmt(mean))} [{escape(_fmt(lo))}, "
                         f"{escape(_fmt(hi))}]</title></circle>")
        legend.append((group, colour, ""))
    return _figure(parts, title, legend, height=height, note=note, kind="histogram")


def interval_chart(rows: Sequence[tuple[str, float, float, float]], *, title: str, x_label: str = "",
                   x_range: tuple[float, float] | None = None, note: str = "") -> str:
    """Dot-and-whisker rows ``(label, value, low, high)``; the value is printed at the right
    margin, clear of the whisker (so labels never overlap the intervals)."""
    rows = list(rows)
    finite = [v for _, *vals in rows for v in vals if _finite(v)]
    if not finite:
        return line_chart([], title=title)
    low, high = x_range if x_range is not None else _range(finite, include_zero=True)
    ticks = nice_ticks(low, high)
    if x_range is None:
        low, high = ticks[0], ticks[-1]
    row_height = 26
    bottom_margin = MARGIN_BOTTOM if x_label else 24  # room for the tick labels, and the axis label if any
    height = MARGIN_TOP + bottom_margin + row_height * len(rows)
    label_width = min(170, 12 + 7 * max(len(r[0]) for r in rows))
    frame = _Frame((low, high), (0.0, 1.0), height=height, bottom_margin=bottom_margin)
    frame.left = label_width
    frame.right = WIDTH - 74
    parts = frame.axes([t for t in ticks if low <= t <= high], [], x_label, "")
    for i, (label, value, lo, hi) in enumerate(rows):
        y = MARGIN_TOP + row_height * i + row_height / 2
        colour = PALETTE[i % len(PALETTE)]
        parts.append(f'<text class="tick" x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>')
        if _finite(lo) and _finite(hi):
            parts.append(f'<line class="whisker" x1="{frame.x(lo):.1f}" x2="{frame.x(hi):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                         f'stroke="{colour}"/>')
            for end in (lo, hi):
                parts.append(f'<line class="whisker" x1="{frame.x(end):.1f}" x2="{frame.x(end):.1f}" y1="{y - 5:.1f}" '
                             f'y2="{y + 5:.1f}" stroke="{colour}"/>')
        if _finite(value):
            parts.append(f'<circle class="dot" cx="{frame.x(value):.1f}" cy="{y:.1f}" r="4" fill="{colour}">'
                         f"<title>{escape(isolated(label))}: {escape(_fmt(value))}</title></circle>")
        shown = _fmt(value) if _finite(value) else "-"
        parts.append(f'<text class="value" x="{WIDTH - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(shown)}</text>')
    return _figure(parts, title, height=height, note=note, kind="interval")
