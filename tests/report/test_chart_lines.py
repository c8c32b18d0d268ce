"""Every line a chart draws is named, and a curve identical to another is said to be.

The SVG is matplotlib's own output (text kept as `<text>`), read as text.
"""

from __future__ import annotations

from qualify.report.charts import identical_series, render_svg


def test_a_dots_chart_draws_the_checks_estimate_labelled_instead_of_a_median() -> None:
    chart = {
        "title": "ratios",
        "kind": "dots",
        "alt": "ratios per pair",
        "data": {"pp512": {"candidate": [-15.9, -12.0, 2.0, 6.0]}, "tg128": {"candidate": [-1.0, 0.5, 1.0]}},
        "marks": [
            {"y": 3.0, "label": "+δ 3.0%"},
            {"y": -3.0, "label": "−δ 3.0%"},
            {"y": -6.14, "category": "pp512", "label": "Δ -6.14%"},
        ],
    }
    svg = render_svg(chart, 0)
    for label in ("Δ -6.14%", "+δ 3.0%", "−δ 3.0%", "estimate (as in the table)", "median"):
        assert label in svg, label
    without = render_svg({**chart, "marks": []}, 1)
    assert "median" in without and "estimate (as in the table)" not in without


def test_identical_curves_are_drawn_dashed_and_named() -> None:
    series = {"edges": [0.0, 1.0, 2.0], "counts": [3, 4]}
    chart = {
        "title": "KLD",
        "kind": "histogram",
        "alt": "per-token KLD",
        "data": {"candidate": series, "pinned": dict(series)},
    }
    assert identical_series(chart) == [("candidate", "pinned")]
    svg = render_svg(chart, 0)
    assert "candidate (= pinned)" in svg and "stroke-dasharray" in svg
    other = {**chart, "data": {"candidate": {**series, "counts": [4, 3]}, "pinned": series}}
    assert identical_series(other) == [] and "(= pinned)" not in render_svg(other, 1)
