"""run.json as types: what a run's, a set's or a fleet's record says (`RunDocument`), each
part a frozen model, checked when the record is read (`qualify.pipeline.record`).

The model declares the keys qualify reads; a document may hold others (a fleet's hosts, a
set's member results, the config snapshot), which the record keeps and saves as they were read.
A key of the wrong type, a required one missing, or a part holding a key qualify never writes is
refused naming run.json and the key, in the words of the run folder's other checks: "plan.stages
[0].file is a list, not a string".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field

from qualify.checks.evidence import Part
from qualify.checks.refusals import checked
from qualify.checks.runoptions import RunOptions
from qualify.pipeline.members import Member, MemberRole
from qualify.pipeline.recordparts import Provenance

Kind = Literal["run", "set", "fleet"]
Status = Literal["running", "complete", "interrupted", "failed"]
M = TypeVar("M", bound=BaseModel)


class RoleInfo(Part):
    """An arm as it played a role in the run, with what its build learned (None: not built yet)."""

    arm: str
    installable: str
    devshell: str | None = None
    drv: str | None = None
    out: str | None = None


class PlanCheck(Part):
    """A check of a stage of the plan the run recorded (`CheckSpec.as_json`)."""

    name: str
    kind: str
    #: The plan's values, read by name by the check's kind.
    params: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, float] = Field(default_factory=dict)
    roles: list[str] = Field(default_factory=list)
    timeout_s: float | None = None
    env: dict[str, str] = Field(default_factory=dict)
    description: str = ""
    vars: dict[str, Any] = Field(default_factory=dict)


class PlanStage(Part):
    """A stage of the plan the run recorded (`StageSpec.as_json`)."""

    name: str
    folder: str
    #: The stage's file in the project, as the plan named it (None: not recorded).
    file: str | None = None
    inconclusive: str = "fail"
    description: str = ""
    checks: list[PlanCheck] = Field(default_factory=list)
    requires: str | None = None


class RecordedPlan(Part):
    """The plan the run was made with (`Plan.as_json`)."""

    source: str | None = None
    builtin: bool = False
    profile: str | None = None
    profiles: list[str] = Field(default_factory=list)
    stages: list[PlanStage] = Field(default_factory=list)
    not_configured: list[str] = Field(default_factory=list)
    #: The stages the plan declares not applicable, each with its reason.
    not_applicable: dict[str, str] = Field(default_factory=dict)


class RecordedPlanFiles(Part):
    """The files the run's plan was read from when the run was made (`planfiles.PlanFiles`),
    each by its name in the project with its sha256, and the digest of them all: what a rerun's
    plan is compared with (run.json's `plan` is the plan its latest attempt read)."""

    digest: str
    files: dict[str, str]


class MemberEntry(Part):
    """A member of a set (`Member.as_json`); a member's own run.json holds its entry as `set`,
    with the set's run id."""

    label: str
    arm: str
    role: MemberRole
    must_fail: list[str] = Field(default_factory=list)
    run_id: str | None = None

    def member(self) -> Member:
        return Member(self.label, self.arm, self.role, tuple(self.must_fail))


class RecordedProject(Part):
    """The project the run was made from: its folder, its qualify.toml and its flake."""

    root: str | None = None
    config: str | None = None
    flake: str | None = None


class RecordedContainment(Part):
    """How the run's commands were held (`qualify.core.containment.Jail.describe`): its processes,
    its records, the commands' privileges, and the protections the host could not give."""

    processes: str = ""
    records: str = ""
    #: None: a run made before commands ran without qualify's privilege.
    privileges: str | None = None
    #: None: nothing missing, or a run made before the protections missing were recorded.
    missing: str | None = None


class RunDocument(Part):
    """The keys of run.json qualify reads, each of its type (absent: what a run made before qualify
    wrote the key meant)."""

    #: A run of one has no kind in any version.
    kind: Kind = "run"
    status: Status = "running"
    run_id: str | None = None
    created_at: str = ""
    finished_at: str | None = None
    profile: str | None = None
    #: The run's number in its runs directory (`runlist.new_run`); None: ordered by its name.
    sequence: int | None = Field(default=None, ge=1)
    roles: dict[str, RoleInfo] = Field(default_factory=dict)
    plan: RecordedPlan = Field(default_factory=RecordedPlan)
    #: None: the run was made before qualify recorded its plan's files.
    plan_files: RecordedPlanFiles | None = None
    members: list[MemberEntry] = Field(default_factory=list)
    set_entry: MemberEntry | None = Field(default=None, alias="set")
    provenance: Provenance = Field(default_factory=Provenance)
    project: RecordedProject = RecordedProject()
    options: RunOptions = Field(default_factory=RunOptions)
    #: Each stage's wall time in seconds, by name.
    timings: dict[str, float] = Field(default_factory=dict)
    #: Each `qualify run` of the run, as it was asked for.
    invocations: list[dict[str, Any]] = Field(default_factory=list)
    #: None: a run made before containment was recorded (or not started yet).
    containment: RecordedContainment | None = None

    @staticmethod
    def read(document: Mapping[str, Any], where: str | Path) -> RunDocument:
        """The keys of `document` (in the current layout) the model declares, checked."""
        declared = {f.alias or name for name, f in RunDocument.model_fields.items()}
        return checked(RunDocument, {k: v for k, v in document.items() if k in declared}, where)
