"""Charts for the report: a check's chart (`qualify.checks.figures`) drawn by matplotlib as inline SVG.

Contract of `render_svg(chart, index)`: `chart` is a check's chart (`qualify.checks.figures`);
the result is one `<svg>` element (no XML prolog) that:
- draws text and axes in `currentColor`, so it follows the page's light or dark scheme;
- has a transparent background, `role="img"` and the chart's text alternative as its label;
- uses ids unique to `index`, so several charts inline in one page never share a clip path;
- keeps text as `<text>` (no embedded glyph outlines), which keeps the file small;
- draws a time series of more than `MAX_POINTS` points as per-bucket min and max, so peaks
  survive downsampling;
- draws a series identical to one drawn before it dashed, "(= pinned)" in its legend, so it
  cannot hide under the other unnoticed (`identical_series` says which, for the caption);
- labels every line it draws: a mark with "x" is a vertical line, a mark with "y" a horizontal
  one (with "category", a "dots" chart draws it over that category only, in place of the
  median bar: a check's own estimate, so the line agrees with its table); a "dots" category
  without such a mark gets its median bar, named in the legend.
A chart whose data cannot be drawn raises `ValueError` naming the chart.
"""

from __future__ import annotations

import functools
import io
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from qualify.checks.figures import (
    Chart,
    DotsChart,
    HistogramChart,
    LinesChart,
    load_chart,
)
from qualify.core.errors import RunStoreError

# A colour no chart uses on purpose, replaced by currentColor in the SVG text.
_INK = "#010203"
# Role colours distinguishable in light and dark schemes and by most colour-blind readers.
ROLE_COLOURS = {"pinned": "#4e79a7", "candidate": "#e15759", "reference": "#59a14f"}
_OTHER_COLOURS = ("#f28e2b", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
MAX_POINTS = 2000


def _colour(role: str, index: int) -> str:
    return ROLE_COLOURS.get(role, _OTHER_COLOURS[index % len(_OTHER_COLOURS)])


def render_svg(chart: Chart | Mapping[str, Any], index: int) -> str:
    """The chart as one inline `<svg>` element (see the module docstring); a chart still in its
    saved layout (a bisect's page builds one) is checked first, as result.json's are."""
    typed = _typed(chart)
    style: dict[str, Any] = {
        "svg.fonttype": "none",
        "svg.hashsalt": "qualify",  # stable output: the same data draws the same bytes
        "text.color": _INK,
        "axes.labelcolor": _INK,
        "axes.edgecolor": _INK,
        "xtick.color": _INK,
        "ytick.color": _INK,
        "font.size": 9,
        "font.family": "sans-serif",
        "figure.dpi": 96,
    }
    _file_backend()
    import matplotlib.pyplot as plt  # on the first chart drawn: see _file_backend

    with plt.rc_context(style):  # type: ignore[arg-type]  # the stub wants literal keys
        fig, ax = plt.subplots(figsize=(7.2, 3.0))
        try:
            _draw(ax, typed)
            for mark in typed.marks:
                if mark.x is None:
                    continue  # horizontal marks: drawn by the kind (`_dots`)
                ax.axvline(float(mark.x), color=_INK, linestyle="--", linewidth=0.8, alpha=0.6)
                if mark.label:
                    ax.annotate(
                        mark.label,
                        (float(mark.x), 1.0),
                        xycoords=("data", "axes fraction"),
                        fontsize=7,
                        rotation=90,
                        va="top",
                        ha="right",
                    )
            ax.set_title(typed.title, loc="left", fontsize=10)
            ax.set_xlabel(typed.x_label)
            ax.set_ylabel(typed.y_label)
            if typed.log_x:
                values = _all_values(typed)
                if values and min(values) > 0:
                    ax.set_xscale("log")
                else:  # zero or negative values: linear near zero, logarithmic beyond
                    ax.set_xscale("symlog", linthresh=_linthresh(typed))
            ax.spines[["top", "right"]].set_visible(False)
            ax.grid(axis="y", alpha=0.25, color=_INK)
            fig.tight_layout()
            buffer = io.StringIO()
            fig.savefig(buffer, format="svg", transparent=True)
        finally:
            plt.close(fig)
    return _inline(buffer.getvalue(), typed.alt, f"c{index}-")


@functools.cache
def _file_backend() -> None:
    """matplotlib drawing to files only, chosen before pyplot is first imported. Imported with
    the first chart drawn, not with this module: `qualify run`, `show` and `report` load this
    module whether or not a chart is drawn, and matplotlib takes about half a second of CPU."""
    import matplotlib

    matplotlib.use("Agg")


def _draw(ax: Any, chart: Chart) -> None:
    if isinstance(chart, DotsChart):
        _dots(ax, chart)
    elif isinstance(chart, HistogramChart):
        _histogram(ax, chart)
    else:
        _lines(ax, chart)


def _typed(chart: Chart | Mapping[str, Any]) -> Chart:
    if isinstance(chart, (DotsChart, HistogramChart, LinesChart)):
        return chart
    try:
        return load_chart(chart, "the chart")
    except RunStoreError as exc:
        raise ValueError(exc.message) from None


def _inline(svg: str, alt: str, prefix: str) -> str:
    start = svg.index("<svg")
    body = svg[start:].replace(_INK, "currentColor")
    # matplotlib numbers its groups from 1 in every figure ("figure_1", "line2d_1"): prefix every
    # id and every reference to one, so two charts in one page never share an id.
    body = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}\1"', body)
    body = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}\1)", body)
    body = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}\1"', body)
    body = re.sub(r"<metadata>.*?</metadata>\s*", "", body, count=1, flags=re.S)  # creator, date
    # Fixed pixel sizes would overflow a phone screen; the viewBox keeps the proportions.
    body = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", body, count=1)
    label = alt.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
    return body.replace("<svg", f'<svg role="img" aria-label="{label}" class="chart"', 1)


def _linthresh(chart: Chart) -> float:
    values = [abs(v) for v in _all_values(chart) if v]
    return min(values) if values else 1.0


def _all_values(chart: Chart) -> list[float]:
    if isinstance(chart, HistogramChart):
        return [float(e) for series in chart.data.values() for e in series.edges]
    if isinstance(chart, LinesChart):
        return [float(x) for series in chart.data.values() for x in series.x]
    return []


def identical_series(chart: Chart | Mapping[str, Any]) -> list[tuple[str, str]]:
    """(role, the role it repeats) for each series equal to one before it, as drawn."""
    try:
        typed = _typed(chart)
    except ValueError:
        return []  # not drawn either: the caption says nothing of its series
    if isinstance(typed, DotsChart):
        return []
    seen: list[tuple[str, object]] = []
    out: list[tuple[str, str]] = []
    for role, series in sorted(typed.data.items(), key=lambda item: _role_order(item[0])):
        twin = next((other for other, values in seen if values == series), None)
        if twin is not None:
            out.append((role, twin))
        else:
            seen.append((role, series))
    return out


def _twin_style(chart: Chart, role: str, label: str) -> tuple[str, dict[str, Any]]:
    twin = dict(identical_series(chart)).get(role)
    if twin is None:
        return label, {}
    return f"{label} (= {twin})", {"linestyle": (0, (4, 3)), "linewidth": 1.8}


def _dots(ax: Any, chart: DotsChart) -> None:
    """Every sample per category and role, side by side, with the role's median as a bar, or
    the check's own estimate where a mark gives one; horizontal marks drawn and labelled."""
    data = chart.data
    categories = list(data)
    roles = sorted({role for per_role in data.values() for role in per_role}, key=_role_order)
    width = 0.8 / max(len(roles), 1)
    marks = [m for m in chart.marks if m.y is not None]
    estimated = {m.category for m in marks if m.category is not None}
    medians_drawn = False
    for mark in marks:
        y = float(mark.y or 0.0)
        if mark.category is not None and mark.category in categories:
            c = categories.index(mark.category)
            ax.hlines(y, c - 0.45, c + 0.45, colors=_INK, linewidth=1.6)
            ax.annotate(mark.label, (c + 0.45, y), fontsize=7, va="center", ha="left")
        elif mark.category is None:
            ax.axhline(y, color=_INK, linestyle="--", linewidth=0.8, alpha=0.6)
            if mark.label:
                ax.annotate(
                    mark.label,
                    (1.0, y),
                    xycoords=("axes fraction", "data"),
                    fontsize=7,
                    va="bottom",
                    ha="right",
                )
    for r, role in enumerate(roles):
        xs: list[float] = []
        ys: list[float] = []
        for c, category in enumerate(categories):
            values = [float(v) for v in data[category].get(role, ())]
            centre = c - 0.4 + width * (r + 0.5)
            # A deterministic spread keeps equal values visible without random jitter.
            xs += [centre + width * 0.6 * ((i % 7) / 6 - 0.5) for i in range(len(values))]
            ys += values
            if values and category not in estimated:
                median = statistics.median(values)
                ax.hlines(
                    median,
                    centre - width * 0.45,
                    centre + width * 0.45,
                    colors=_colour(role, r),
                    label=None if medians_drawn else "median",
                )
                medians_drawn = True
        ax.scatter(xs, ys, s=16, alpha=0.75, color=_colour(role, r), label=role, linewidths=0)
    if estimated:
        ax.plot([], [], color=_INK, linewidth=1.6, label="estimate (as in the table)")
    ax.set_xticks(range(len(categories)), categories, rotation=20 if len(categories) > 4 else 0)
    ax.legend(frameon=False, fontsize=8)


def _histogram(ax: Any, chart: HistogramChart) -> None:
    for r, (role, series) in enumerate(sorted(chart.data.items(), key=lambda item: _role_order(item[0]))):
        edges, counts = [float(e) for e in series.edges], [float(c) for c in series.counts]
        if len(edges) != len(counts) + 1:
            raise ValueError(f"chart {chart.title!r}: {role} has {len(edges)} edges for {len(counts)} counts")
        label, style = _twin_style(chart, role, role)
        ax.stairs(counts, edges, label=label, color=_colour(role, r), **{"linewidth": 1.4, **style})
    ax.legend(frameon=False, fontsize=8)


def _lines(ax: Any, chart: LinesChart) -> None:
    for r, (role, series) in enumerate(sorted(chart.data.items(), key=lambda item: _role_order(item[0]))):
        xs, ys = downsample([float(x) for x in series.x], [float(y) for y in series.y], MAX_POINTS)
        label, style = _twin_style(chart, role, role)
        ax.plot(xs, ys, label=label, color=_colour(role, r), **{"linewidth": 1.0, **style})
    ax.legend(frameon=False, fontsize=8)


def downsample(xs: Sequence[float], ys: Sequence[float], limit: int) -> tuple[list[float], list[float]]:
    """At most `limit` points: per bucket of consecutive points, its minimum and maximum in
    time order, so a spike or a dip is never averaged away. NaNs are kept as gaps."""
    if len(xs) != len(ys):
        raise ValueError(f"a series has {len(xs)} x values and {len(ys)} y values")
    if len(xs) <= limit:
        return list(xs), list(ys)
    buckets = max(limit // 2, 1)
    size = math.ceil(len(xs) / buckets)
    out_x: list[float] = []
    out_y: list[float] = []
    for start in range(0, len(xs), size):
        chunk = [(x, y) for x, y in zip(xs[start : start + size], ys[start : start + size], strict=True)]
        finite = [p for p in chunk if not math.isnan(p[1])]
        if not finite:
            out_x.append(chunk[0][0])
            out_y.append(math.nan)
            continue
        low, high = min(finite, key=lambda p: p[1]), max(finite, key=lambda p: p[1])
        for x, y in sorted({low, high}):
            out_x.append(x)
            out_y.append(y)
    return out_x, out_y


def _role_order(role: str) -> tuple[int, str]:
    order = ("reference", "pinned", "candidate")
    return (order.index(role) if role in order else len(order), role)
