"""A check's record, result.json, as its type: its verdict, its findings, the roles it measured,
the check as it was measured (the plan's `SavedCheck`, which `--rejudge` and the bisect's gate
judge again from) and the facts every kind shares, checked on load and written through it
(`qualify.records.model` for what it shares with stage.json).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationInfo, field_serializer

from qualify.checks.evidence import Evidence
from qualify.checks.figures import Chart, Figure, Table, load_charts, load_tables
from qualify.checks.registry import evidence_types
from qualify.core.checkspec import CheckSpec
from qualify.records.migrations import RESULT_STEPS, Step
from qualify.records.model import (
    FolderName,
    OutputText,
    Record,
    RecordPart,
    Seconds,
    VerdictWord,
)
from qualify.records.plan import SavedCheck


class SavedFinding(RecordPart):
    """One finding of a check (`qualify.checks.base.Finding` as saved): its verdict word, its
    message and the role it is about (None: the whole check; the key is always written)."""

    verdict: VerdictWord
    message: OutputText
    role: str | None

    def as_json(self) -> dict[str, Any]:
        return self.model_dump()


class RolePlayed(RecordPart):
    """A role as the check measured it: the arm that played it and the build it ran."""

    arm: str
    out: str | None = None


class ResultFacts(RecordPart):
    """What a judge wrote beside its verdict. Each kind's facts are its own type
    (`CheckResult.evidence`); what every reader shares is declared here, the rest kept as it
    was written."""

    model_config = ConfigDict(extra="allow")

    #: What the check itself says its evidence does not cover (too few pairs, a stand-in, ...).
    limits_of_evidence: list[str] | None = None


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
    #: The check as it was measured: its kind, parameters and limits, as the plan run.json
    #: records saves a check (None: a result written without it).
    spec: SavedCheck | None = None
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
        return self.spec.kind if self.spec is not None else self.kind

    def measured_spec(self) -> CheckSpec:
        """The check as it was measured, as the plan files would load it; a result saved
        without its spec is its folder's check of its kind, with its roles."""
        if self.spec is not None:
            return self.spec.spec()
        return CheckSpec(name=self.check or "", kind=self.kind, params={}, limits={}, roles=tuple(self.roles))

    @field_serializer("tables", "charts")
    def _figures_json(self, figures: list[Figure]) -> list[dict[str, Any]]:
        return [figure.to_json() for figure in figures]

    def _loaded(self) -> None:
        types = evidence_types(self.kind)
        facts = self.facts.model_dump(exclude_unset=True) if self.facts is not None else {}
        if types is not None and facts:  # none: no judge wrote facts (a crash, never measured)
            self._evidence = types.facts.load(facts, self.path, "facts")
