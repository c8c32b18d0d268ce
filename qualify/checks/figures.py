"""A check's tables and charts as types: what a judge builds, what result.json holds under
`tables` and `charts`, and what the report draws, one frozen model each.

A judge builds them (`Judgement.tables`, `Judgement.charts`) and they are checked as they are
built; result.json holds them as `to_json` writes them, which is the layout qualify always wrote;
`load_tables` and `load_charts` read them back, refusing a wrong one naming the file and the key
(`tables[0].rows[2]`). A chart's data is typed by its kind: a "dots" chart's samples by category
and role, a "histogram"'s edges and counts by role, a "lines" chart's x and y by role.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BeforeValidator, PlainValidator, ValidationError, model_validator

from qualify.checks.evidence import HINT, Part
from qualify.checks.refusals import place, refusal, type_name
from qualify.core.errors import RunStoreError

T = TypeVar("T")


def _listed(value: object) -> object:
    # A JSON array reads as a list; the models hold tuples, so that a figure is frozen through.
    return tuple(value) if isinstance(value, list) else value


#: A sequence as the models hold it: a tuple, read from a JSON array (a list) or built as one.
Listed = Annotated[tuple[T, ...], BeforeValidator(_listed)]


def _number(value: object) -> int | float:
    # An integer stays one, so that a count is written back as it was read ("3", never "3.0").
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("a number")
    return value


def _cell(value: object) -> str | int | float | bool | None:
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise ValueError("a string, a number, true, false or null")
    return value


#: A number of a chart: an integer or a float (NaN is a gap in a line).
Number = Annotated[int | float, PlainValidator(_number)]
#: A table's cell: any JSON value but a list or an object, shown as text.
Cell = Annotated[str | int | float | bool | None, PlainValidator(_cell)]


class Table(Part):
    """A table for the report; its cells are escaped when rendered."""

    title: str
    columns: Listed[str]
    rows: Listed[Listed[Cell]]
    #: Shown closed in the report (the rest behind a click): unchanged rows, long listings.
    collapsed: bool = False
    #: Shown above the check's findings: what a reviewer reads first (the compile stage's table
    #: of what goes with its failures).
    lead: bool = False

    def to_json(self) -> dict[str, Any]:
        saved: dict[str, Any] = {
            "title": self.title,
            "columns": list(self.columns),
            "rows": [list(r) for r in self.rows],
            "collapsed": self.collapsed,
        }
        if self.lead:  # written only where set: every other table keeps the layout it had
            saved["lead"] = True
        return saved


class Mark(Part):
    """A line a chart draws over its data: at `x` a vertical one (a limit, a compaction), at `y`
    a horizontal one (a margin); with `category`, a "dots" chart draws it over that category
    only (the check's own estimate)."""

    x: Number | None = None
    y: Number | None = None
    category: str | None = None
    label: str = ""

    @model_validator(mode="after")
    def _placed(self) -> Mark:
        if (self.x is None) == (self.y is None):
            raise ValueError("a mark at an x or at a y")
        return self

    def to_json(self) -> dict[str, Any]:
        # The keys the mark was built or read with, so that it is written back as it was.
        return self.model_dump(exclude_unset=True)


class Histogram(Part):
    """A distribution already binned: len(edges) is len(counts) + 1 (the drawing checks it)."""

    edges: Listed[Number]
    counts: Listed[Number]


class Line(Part):
    """A time series: an x for each y (the drawing checks it)."""

    x: Listed[Number]
    y: Listed[Number]


class _Chart(Part):
    title: str
    #: The text alternative a screen reader gets, written by the check from the same numbers.
    alt: str
    x_label: str = ""
    y_label: str = ""
    log_x: bool = False
    marks: Listed[Mark] = ()

    def _json(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "title": self.title,
            "kind": kind,
            "alt": self.alt,
            "data": data,
            "x_label": self.x_label,
            "y_label": self.y_label,
            "log_x": self.log_x,
            "marks": [m.to_json() for m in self.marks],
        }


class DotsChart(_Chart):
    """Every sample shown (bench pairs, repeats): {category: {role: [values]}}."""

    kind: Literal["dots"] = "dots"
    data: dict[str, dict[str, Listed[Number]]]

    def to_json(self) -> dict[str, Any]:
        data = {c: {role: list(v) for role, v in per_role.items()} for c, per_role in self.data.items()}
        return self._json(self.kind, data)


class HistogramChart(_Chart):
    """A distribution per role, already binned."""

    kind: Literal["histogram"] = "histogram"
    data: dict[str, Histogram]

    def to_json(self) -> dict[str, Any]:
        data = {r: {"edges": list(s.edges), "counts": list(s.counts)} for r, s in self.data.items()}
        return self._json(self.kind, data)


class LinesChart(_Chart):
    """A time series per role, downsampled when drawn."""

    kind: Literal["lines"] = "lines"
    data: dict[str, Line]

    def to_json(self) -> dict[str, Any]:
        return self._json(self.kind, {r: {"x": list(s.x), "y": list(s.y)} for r, s in self.data.items()})


Chart = DotsChart | HistogramChart | LinesChart
CHART_KINDS: dict[str, type[Chart]] = {"dots": DotsChart, "histogram": HistogramChart, "lines": LinesChart}
#: What a result's `tables` and `charts` hold, as the report reads them.
Figure = Table | Chart


def load_tables(value: object, where: str | Path) -> tuple[Table, ...]:
    """result.json's `tables` (`value`, [] where it has none), each checked."""
    return tuple(
        _checked(Table, item, where, f"tables[{i}]") for i, item in enumerate(_items(value, where, "tables"))
    )


def load_charts(value: object, where: str | Path) -> tuple[Chart, ...]:
    """result.json's `charts` (`value`, [] where it has none), each checked as its kind says."""
    return tuple(
        load_chart(item, where, f"charts[{i}]") for i, item in enumerate(_items(value, where, "charts"))
    )


def load_chart(document: object, where: str | Path, at: str = "") -> Chart:
    """One chart in its saved layout, checked as its kind says (`at`: where it sits in `where`)."""
    if not isinstance(document, Mapping):
        raise RunStoreError(f"{where}: {at or 'the chart'} is {type_name(document)}, not an object", HINT)
    kind = document.get("kind")
    model = CHART_KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        said = "missing" if "kind" not in document else f"an unknown kind {kind!a}"
        raise RunStoreError(
            f"{where}: {place(('kind',), at)} is {said}, not one of {', '.join(CHART_KINDS)}", HINT
        )
    return _checked(model, document, where, at)


F = TypeVar("F", bound=Part)


def _items(value: object, where: str | Path, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise RunStoreError(f"{where}: {key} is {type_name(value)}, not a list", HINT)
    return value


def _checked(model: type[F], document: object, where: str | Path, at: str) -> F:
    """`document` as `model`, or a RunStoreError naming `where` and the key as a reader writes
    it (`charts[0].data.pinned.edges[3]`)."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise refusal(exc, where, at) from None
