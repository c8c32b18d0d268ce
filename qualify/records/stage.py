"""A stage's record, stage.json, as its type: the checks it ran with their verdicts, what it ran
under, checked on load and written through it (`qualify.records.model` for what it shares with
result.json).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from qualify.records.migrations import STAGE_STEPS, Step
from qualify.records.model import (
    FolderName,
    OutputText,
    PlainName,
    Record,
    RecordPart,
    Seconds,
    StageStatus,
    StageVerdictWord,
    VerdictWord,
)


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
