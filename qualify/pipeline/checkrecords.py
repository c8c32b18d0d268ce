"""A stage's and a check's records as types: stage.json and result.json, checked on load and
written through them (`qualify.pipeline.recordmodel` for what both share; run.json is
`qualify.pipeline.record`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, PrivateAttr, ValidationInfo, field_serializer

from qualify.checks.evidence import Evidence
from qualify.checks.figures import Chart, Figure, Table, load_charts, load_tables
from qualify.checks.registry import evidence_types
from qualify.pipeline.migrations import RESULT_STEPS, STAGE_STEPS, Step
from qualify.pipeline.recordmodel import (
    OutputText,
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
    reason: OutputText

    def to_json(self) -> dict[str, Any]:
        return self.model_dump()


class StaleMark(RecordPart):
    """A kept stage whose inputs changed since it ran (`stagerun.mark_stale`)."""

    since: str
    inputs_hash_now: str


class RanUnder(RecordPart):
    """The plan and the source revision a stage's attempt ran under (`planfiles.PlanStamp`)."""

    plan_digest: str
    revision: str | None = None
    #: Whether the source's tracked files had uncommitted changes (None: not a git checkout).
    dirty: bool | None = None
    #: How the plan differed from the files the run recorded when it was made, a line a file
    #: (empty: it did not; None: the run recorded none to compare with).
    plan_changes: list[str] | None = None


class StageRecord(Record):
    """A stage's stage.json, checked: its status, verdict and checks as one attempt saved them."""

    STEPS: ClassVar[Mapping[int, Step]] = STAGE_STEPS

    name: str = ""
    folder: FolderName = Field(default=None, validate_default=True)
    status: StageStatus
    #: None until the stage is complete.
    verdict: StageVerdictWord | None = None
    reason: OutputText = ""
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
    #: The plan's digest and the revision the attempt ran under (None: a stage recorded before
    #: qualify kept them, or one blocked before it ran).
    ran_under: RanUnder | None = None
    checks: list[CheckEntry] = Field(default_factory=list)
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: Seconds | None = None
    rejudged_at: str | None = None
    verdict_before_rejudge: StageVerdictWord | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def with_checks(self, entries: list[CheckEntry], **changes: Any) -> StageRecord:
        """This record listing `entries` as its checks (and `changes` to its other keys)."""
        return self.updated(checks=[entry.to_json() for entry in entries], **changes)


def _no_spec_is_empty(value: Any) -> Any:
    return {} if value is None else value


def _figures(value: Any) -> Any:
    # A writer may hand over figures already typed (`model_copy`); the file holds their JSON.
    if not isinstance(value, list):
        return value
    return [v.to_json() if isinstance(v, Figure) else v for v in value]


def _tables_in(value: Any, info: ValidationInfo) -> Any:
    """A result's tables, checked by their type: a wrong one names the file and the key."""
    return list(load_tables(_figures(value), _where(info)))


def _charts_in(value: Any, info: ValidationInfo) -> Any:
    return list(load_charts(_figures(value), _where(info)))


def _where(info: ValidationInfo) -> Path | str:
    return info.context["path"] if info.context is not None else "result.json"


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
    reason: OutputText = ""
    judged: list[str] = Field(default_factory=list)
    findings: list[SavedFinding] = Field(default_factory=list)
    #: The report's tables and charts, typed (`qualify.checks.figures`) and saved in their
    #: own layout.
    tables: Annotated[list[Table], BeforeValidator(_tables_in)] = Field(default_factory=list)
    charts: Annotated[list[Chart], BeforeValidator(_charts_in)] = Field(default_factory=list)
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

    @field_serializer("tables", "charts")
    def _figures_json(self, figures: list[Figure]) -> list[dict[str, Any]]:
        return [figure.to_json() for figure in figures]

    def _loaded(self) -> None:
        types = evidence_types(self.kind)
        facts = self.facts.model_dump(exclude_unset=True) if self.facts is not None else {}
        if types is not None and facts:  # none: no judge wrote facts (a crash, never measured)
            self._evidence = types.facts.load(facts, self.path, "facts")
