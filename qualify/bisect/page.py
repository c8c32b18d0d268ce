"""bisect.html: the answer, the gate's figure per probed step as a chart with the flip marked,
and the steps' table. A page of its own, one file with nothing to fetch, so it opens from the
bisect's folder. The chart is a saved chart's data, drawn by the caller's `draw`: the report's
own SVG code (`qualify.report.charts.render_svg`), which sits in a layer this one cannot import."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from qualify.bisect.answers import Answer
from qualify.bisect.bars import figure_text, figure_values
from qualify.bisect.report import answer_line, step_rows
from qualify.bisect.state import BisectState
from qualify.records.bisect import Finding, StepRow

#: Draws a saved chart as one inline `<svg>` element: `render_svg(chart, index)`'s contract.
Draw = Callable[[Mapping[str, Any], int], str]

_STYLE = (
    "body{font-family:sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    "table{border-collapse:collapse}td,th{border:1px solid #8888;padding:.2rem .5rem;text-align:left}"
    ".chart{width:100%;height:auto}"
)


def series_chart(answer: Answer, state: BisectState, rows: Sequence[StepRow]) -> dict[str, Any] | None:
    """The figure per probed step as a saved chart's data ("lines": x the step's index), the
    flip a vertical mark between the last good and the first bad step; None without figures."""
    data: dict[str, dict[str, list[float]]] = {}
    said = []
    for row in rows:
        values = figure_values(row.figure)
        if not values:
            continue
        for name, value in values.items():
            if value is not None:
                series = data.setdefault(name, {"x": [], "y": []})
                series["x"].append(float(row.step))
                series["y"].append(value)
        said.append(f"step {row.step} {row.arm}: {figure_text(row.figure) or 'no figure'} ({row.outcome})")
    if not data:
        return None
    marks = []
    if answer.finding is Finding.FOUND and answer.bad is not None:
        marks.append({"x": answer.bad - 0.5, "label": f"flip: {state.series[answer.bad]}"})
    gate = state.search_context().gate
    return {
        "title": f"{gate} per step",
        "kind": "lines",
        "alt": f"{gate} per probed step: " + "; ".join(said),
        "data": data,
        "x_label": "step",
        "y_label": gate.rsplit("/", 1)[-1] if "candidate" in data or "pinned" in data else "kernels",
        "log_x": False,
        "marks": marks,
    }


def html_page(answer: Answer, state: BisectState, draw: Draw) -> str:
    """The whole page: the answer line, the chart (when the gate has figures) and every step."""
    rows = step_rows(answer, state)
    context = state.search_context()
    title = f"qualify bisect: series {context.series}, gate {context.gate}"
    chart = series_chart(answer, state, rows)
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p><strong>{escape(answer_line(answer, state))}</strong></p>",
    ]
    if chart is not None:
        parts.append(f"<figure>{draw(chart, 0)}<figcaption>{escape(chart['alt'])}</figcaption></figure>")
    parts.append(
        "<table><thead><tr><th>step</th><th>arm</th><th>outcome</th><th>probes</th>"
        "<th>gate verdict</th><th>reason</th><th>figure</th></tr></thead><tbody>"
    )
    for row in rows:
        cells = (row.step, row.arm, row.outcome, row.probes, row.verdict or "", row.reason or "")
        parts.append(
            "<tr>"
            + "".join(f"<td>{escape(str(c))}</td>" for c in (*cells, figure_text(row.figure)))
            + "</tr>"
        )
    parts.append("</tbody></table></body></html>")
    return "\n".join(parts) + "\n"
