"""A stage's and a check's records as types: stage.json and result.json, checked on load and
written through them (`qualify.pipeline.recordmodel` for what both share; run.json is
`qualify.pipeline.record`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, PrivateAttr, ValidationInfo

from qualify.checks.evidence import Evidence
from qualify.checks.registry import evidence_types
from qualify.pipeline.migrations import RESULT_STEPS, STAGE_STEPS, Step
from qualify.pipeline.recordfields import (
    a_list,
    is_object,
    is_str,
    mapping,
    objects,
    string,
    wrong,
)
from qualify.pipeline.recordmodel import (
    PlainName,
    Record,
    RecordPart,
    Seconds,
    StageStatus,
    StageVerdictWord,
    VerdictWord,
)
from qualify.pipeline.resultparts import ResultFacts, RolePlayed, SavedFinding
from qualify.pipeline.resultspec import SavedSpec


def _this_folder(value: Any, info: ValidationInfo) -> Any:
    """A record that does not name its stage's folder (or its check) is of the folder it is in."""
    return info.context["folder"] if value is None and info.context is not None else value


#: A name a record may leave out: then its folder's.
FolderName = Annotated[PlainName, BeforeValidator(_this_folder)]


class CheckEntry(RecordPart):
    """A check as its stage.json lists it: name, kind, verdict and why."""

    name: PlainName
    kind: str
    verdict: VerdictWord
    reason: str

    def to_json(self) -> dict[str, Any]:
        return self.model_dump()


class StaleMark(RecordPart):
    """A kept stage whose inputs changed since it ran (`stagerun.mark_stale`)."""

    since: str
    inputs_hash_now: str


class StageRecord(Record):
    """A stage's stage.json, checked: its status, verdict and checks as one attempt saved them."""

    STEPS: ClassVar[Mapping[int, Step]] = STAGE_STEPS

    name: str = ""
    folder: FolderName = Field(default=None, validate_default=True)
    status: StageStatus
    #: None until the stage is complete.
    verdict: StageVerdictWord | None = None
    reason: str = ""
    attempt: int | None = None
    profile: str | None = None
    inputs_hash: str | None = None
    #: How the plan counts an INCONCLUSIVE check: "fail" or "warn".
    inconclusive: str | None = None
    ungated: bool = False
    #: The stage whose gate this one ran past (`--no-gate`), with its verdict.
    ungated_past: str | None = None
    #: The stage whose verdict kept this one from running.
    blocked_by: str | None = None
    stale: StaleMark | None = None
    #: The stage as the plan gave it (`StageSpec.as_json`), compared with the run's plan.
    spec: dict[str, Any] | None = None
    #: The project's configuration the attempt ran with.
    config: dict[str, Any] | None = None
    checks: list[CheckEntry] = Field(default_factory=list)
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: Seconds | None = None
    rejudged_at: str | None = None
    verdict_before_rejudge: StageVerdictWord | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def with_check(self, entry: CheckEntry) -> StageRecord:
        """This record with one more check listed."""
        return self.updated(checks=[*(c.to_json() for c in self.checks), entry.to_json()])


def _no_spec_is_empty(value: Any) -> Any:
    return {} if value is None else value


class CheckResult(Record):
    """A check's result.json, checked: its verdict and the evidence the report shows."""

    STEPS: ClassVar[Mapping[int, Step]] = RESULT_STEPS

    #: The stage the check is of, as the result names it ("" when it does not).
    stage: str = ""
    check: FolderName = Field(default=None, validate_default=True)
    kind: str = ""
    verdict_rules: str = ""
    #: The roles the check measured, by name.
    roles: dict[str, RolePlayed] = Field(default_factory=dict)
    #: The check as it was measured: its kind, parameters and limits.
    spec: Annotated[SavedSpec, BeforeValidator(_no_spec_is_empty)] = Field(default_factory=SavedSpec)
    inputs_hash: str | None = None
    ungated: bool = False
    started_at: str | None = None
    duration_s: Seconds | None = None
    crashed: str | None = None
    verdict: VerdictWord
    reason: str = ""
    judged: list[str] = Field(default_factory=list)
    findings: list[SavedFinding] = Field(default_factory=list)
    #: The report's tables and charts, their shapes checked by `_tables` and `_charts`.
    tables: list[dict[str, Any]] = Field(default_factory=list)
    charts: list[dict[str, Any]] = Field(default_factory=list)
    facts: ResultFacts | None = None
    rejudged_at: str | None = None
    _evidence: Evidence | None = PrivateAttr(default=None)

    @property
    def evidence(self) -> Evidence | None:
        """The facts as the kind's type (`qualify.checks.evidence`), checked when the result was
        read; None for a kind whose facts are not typed, or a result with no facts."""
        return self._evidence

    @property
    def limits_of_evidence(self) -> list[str]:
        return list(self.facts.limits_of_evidence or []) if self.facts is not None else []

    @property
    def judged_as(self) -> str:
        """The kind of the check as it was judged: its saved spec's, else the result's."""
        return self.spec.kind if self.spec.kind is not None else self.kind

    @classmethod
    def _check_shapes(cls, document: Mapping[str, Any], path: Path) -> None:
        _tables(document, path)
        _charts(document, path)

    def _loaded(self) -> None:
        types = evidence_types(self.kind)
        facts = self.facts.model_dump(exclude_unset=True) if self.facts is not None else {}
        if types is not None and facts:  # none: no judge wrote facts (a crash, never measured)
            self._evidence = types.facts.load(facts, self.path, "facts")


def _tables(document: Mapping[str, Any], path: Path) -> tuple[Mapping[str, Any], ...]:
    """Each table a title, its columns' names and rows of cells (a cell is any JSON value: it is
    shown as text)."""
    tables = objects(document, "tables", path)
    for index, table in enumerate(tables):
        at = f"tables[{index}]"
        if not isinstance(table.get("title"), str):
            raise wrong(path, f"{at}.title", table.get("title"), "a string")
        a_list(table.get("columns"), path, f"{at}.columns", is_str, "a string")
        a_list(table.get("rows"), path, f"{at}.rows", lambda row: isinstance(row, list), "a list of cells")
        if not isinstance(table.get("collapsed", False), bool):
            raise wrong(path, f"{at}.collapsed", table.get("collapsed"), "true or false")
    return tables


def _charts(document: Mapping[str, Any], path: Path) -> tuple[Mapping[str, Any], ...]:
    """Each chart a title, a kind, its text alternative and its data by series (what is inside
    a series, the chart's drawing checks: a chart it cannot draw is shown as not drawn)."""
    charts = objects(document, "charts", path)
    for index, chart in enumerate(charts):
        at = f"charts[{index}]"
        for key in ("title", "kind", "alt"):
            if not isinstance(chart.get(key), str):
                raise wrong(path, f"{at}.{key}", chart.get(key), "a string")
        for key in ("x_label", "y_label"):
            string(chart, key, path, at=f"{at}.")
        data = mapping(chart.get("data"), str(path), f"{at}.data")
        for name, series in data.items():
            mapping(series, str(path), f"{at}.data.{name}")
        a_list(chart.get("marks") or [], path, f"{at}.marks", is_object, "an object")
    return charts
