"""A check's tables and charts as types: every recorded run's figures (a bench's dots, a KLD
histogram, a soak's lines, every table) read as `Table` and the chart of their kind and are
written back byte for byte; what a judge builds is written in the layout qualify always wrote;
a figure that does not hold is refused naming the file and the key, when it is read and when a
judge builds it; and the report draws a typed chart as it drew its saved layout."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from recorded_runs import unpack

from qualify.checks.figures import (
    DotsChart,
    Histogram,
    HistogramChart,
    Line,
    LinesChart,
    Mark,
    Table,
    load_chart,
    load_charts,
    load_tables,
)
from qualify.core.errors import RunStoreError
from qualify.records.result import CheckResult
from qualify.report.charts import identical_series, render_svg

REPO = Path(__file__).resolve().parents[2]
RECORDED = [
    REPO / "examples" / "llama-cpp-cuda" / "recorded" / "20261201-162842-cuda135.tar.xz",
    REPO / "examples" / "llama-cpp-rocm" / "recorded" / "20261205-081523-rocm72.tar.xz",
]


@pytest.fixture(scope="module")
def recorded_results(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    where = tmp_path_factory.mktemp("recorded")
    return sorted(p for archive in RECORDED for p in unpack(archive, where).rglob("result.json"))


def test_every_recorded_figure_reads_and_is_written_back_as_it_was(recorded_results: list[Path]) -> None:
    kinds: set[str] = set()
    tables = 0
    for path in recorded_results:
        document = json.loads(path.read_text())
        result = CheckResult.load(path)
        written = {
            "tables": [t.to_json() for t in result.tables],
            "charts": [c.to_json() for c in result.charts],
        }
        # As text: a NaN (a gap in a line) is equal to itself only there.
        for key in ("tables", "charts"):
            assert json.dumps(written[key]) == json.dumps(document.get(key, [])), (path, key)
        kinds |= {c.kind for c in result.charts}
        tables += len(result.tables)
    assert kinds == {"dots", "histogram", "lines"} and tables > 30  # the test saw every kind


def test_a_judge_built_chart_is_written_in_the_saved_layout() -> None:
    chart = HistogramChart(
        title="KLD",
        alt="per token",
        data={"pinned": Histogram(edges=(1e-7, 1.0), counts=(3,))},
        x_label="nats",
        log_x=True,
        marks=(Mark(x=1, label="max_p99_kld"),),
    )
    assert json.dumps(chart.to_json()) == json.dumps(
        {
            "title": "KLD",
            "kind": "histogram",
            "alt": "per token",
            "data": {"pinned": {"edges": [1e-7, 1.0], "counts": [3]}},
            "x_label": "nats",
            "y_label": "",
            "log_x": True,
            "marks": [{"x": 1, "label": "max_p99_kld"}],  # an integer stays one
        }
    )
    dots = DotsChart(
        title="r", alt="a", data={"pp64": {"candidate": (1.5, -2)}}, marks=(Mark(y=3.0, category="pp64"),)
    )
    assert dots.to_json()["marks"] == [{"y": 3.0, "category": "pp64"}]
    assert load_chart(dots.to_json(), "x") == dots
    table = Table(title="t", columns=("a", "b"), rows=(("x", 1), (None, 2.5)), collapsed=True)
    assert load_tables([table.to_json()], "x") == (table,)


@pytest.mark.parametrize(
    ("tables", "charts", "said"),
    [
        ({"title": "x"}, [], "tables is an object, not a list"),
        (
            [{"title": "t", "columns": ["a"], "rows": [["x", ["y"]]]}],
            [],
            "tables[0].rows[0][1] is a list, not a",
        ),
        (
            [{"title": "t", "columns": ["a"], "rows": [], "collapsed": "no"}],
            [],
            "tables[0].collapsed is a string",
        ),
        ([{"title": "t", "columns": ["a"], "rows": [], "colour": 1}], [], "tables[0].colour: not a field"),
        (
            [],
            [{"title": "t", "kind": "pie", "alt": "", "data": {}}],
            "charts[0].kind is an unknown kind 'pie'",
        ),
        (
            [],
            [
                {
                    "title": "t",
                    "kind": "histogram",
                    "alt": "",
                    "data": {"pinned": {"edges": [1, "2"], "counts": []}},
                }
            ],
            "charts[0].data.pinned.edges[1] is a string, not a number",
        ),
        (
            [],
            [{"title": "t", "kind": "lines", "alt": "", "data": {"pinned": {"x": []}}}],
            "charts[0].data.pinned.y is missing",
        ),
        (
            [],
            [{"title": "t", "kind": "dots", "alt": "", "data": {}, "marks": [{"label": "?"}]}],
            "charts[0].marks[0] is an object, not a mark at an x or at a y",
        ),
    ],
)
def test_a_figure_that_does_not_hold_is_refused_naming_file_and_key(
    tmp_path: Path, tables: Any, charts: Any, said: str
) -> None:
    path = tmp_path / "result.json"
    path.write_text(
        json.dumps({"schema_version": 3, "check": "c", "verdict": "PASS", "tables": tables, "charts": charts})
    )
    with pytest.raises(RunStoreError) as refused:
        load_tables(tables, path)
        load_charts(charts, path)
    assert str(path) in refused.value.message and said in refused.value.message, refused.value.message


def test_a_judge_cannot_build_a_figure_no_reader_would_accept() -> None:
    with pytest.raises(ValidationError):
        Table(title="t", columns=("a",), rows=((object(),),))
    with pytest.raises(ValidationError):
        Mark(label="nowhere")
    with pytest.raises(ValidationError):
        LinesChart(title="t", alt="a", data={"pinned": {"x": (1.0,), "y": ("1",)}})  # type: ignore[dict-item]


def test_a_typed_chart_is_drawn_as_its_saved_layout() -> None:
    series = Line(x=(0.0, 1.0, 2.0), y=(1.0, math.nan, 3.0))
    chart = LinesChart(
        title="RSS",
        alt="rss",
        data={"pinned": series, "candidate": series},
        marks=(Mark(x=1.0, label="warm-up"),),
    )
    assert render_svg(chart, 0) == render_svg(chart.to_json(), 0)
    assert identical_series(chart) == identical_series(chart.to_json()) == [("candidate", "pinned")]
    with pytest.raises(ValueError, match=r"data\.pinned\.y is missing"):
        render_svg({**chart.to_json(), "data": {"pinned": {"x": [1]}}}, 1)
