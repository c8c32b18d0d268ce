"""run.json as its type: a run's, a set's or a fleet's record, checked on load and written
through it.

A run folder may come from another host (`qualify merge`), from an older qualify, or from a
hand that edited it; what it says is read once, here, and checked before anything is read or
written through it: its version (an older layout is read as the current one, the file left as
it is: `qualify.records.migrations`), its kind, status and verdict words, its roles, its plan's
stages (their names and folders) and every label that names a folder. Its keys are declared as
frozen models (`RunDocument`, each part a model of its own); a document may hold others (a
fleet's hosts, a set's member results, the config snapshot), which the record keeps and saves
as they were read. A key of the wrong type, a required one missing, or a part holding a key
qualify never writes is refused naming run.json and the key, in the words of the run folder's
other checks: "plan.stages[0].file is a list, not a string".

A reader asks the record (`RunRecord`: `candidate_arm`, `stages`, `members`), never the dict. A
writer has the document it builds checked (`parse`) and saves the record (`save`: atomic, at
the current version), or changes a saved one (`updated`, `update_run`). A field changed on the
record is written over its key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, Field

from qualify.checks.base import CANDIDATE
from qualify.checks.evidence import HINT, Part
from qualify.checks.refusals import checked
from qualify.checks.runoptions import RunOptions
from qualify.core.errors import RunStoreError
from qualify.core.labels import (
    check_saved_labels,
    name_problem,
)
from qualify.core.plaintext import clean
from qualify.core.provenance import RecordedGpu
from qualify.core.runstore import RECORD_VERSION, RunDir, check_writer, read_json, write_json
from qualify.records import seal
from qualify.records.migrations import RUN_STEPS, migrate
from qualify.records.plan import RecordedPlan, RecordedPlanFiles, SavedStage
from qualify.records.provenance import Origin, Provenance, RecordedGit, RecordedHost, origin
from qualify.records.rejudgements import Rejudgement, rejudgements

MemberRole = Literal["candidate", "positive", "negative"]

#: How a member's role reads in the report.
ROLE_TITLES: dict[str, str] = {
    "candidate": "candidate",
    "positive": "positive control",
    "negative": "negative control",
}


@dataclass(frozen=True)
class Member:
    """One member of a run set: the arm in its candidate role and what it must show."""

    label: str  # the member's folder and its name in every report
    arm: str
    role: MemberRole
    must_fail: tuple[str, ...] = ()  # a negative control's stages

    @property
    def is_control(self) -> bool:
        return self.role != "candidate"

    @property
    def title(self) -> str:
        return ROLE_TITLES[self.role]

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "arm": self.arm, "role": self.role, "must_fail": list(self.must_fail)}


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


#: The statuses a writer may save (`ondisk` reads a dead writer's as "dead").
STATUSES: tuple[str, ...] = get_args(Status)


@dataclass(frozen=True)
class StageEntry:
    """A stage of the plan the run records: the stage as saved, checked (`SavedStage`), and the
    spec as written, compared whole with its stage.json's and saved again as it was."""

    saved: SavedStage
    spec: Mapping[str, Any]

    @property
    def name(self) -> str:
        return self.saved.name

    @property
    def folder(self) -> str:
        return self.saved.folder

    @property
    def file(self) -> str | None:
        """The stage's file in the project, as the plan named it (None: not recorded)."""
        return self.saved.file

    @property
    def inconclusive(self) -> str:
        """How an INCONCLUSIVE check counts in the stage's verdict ("fail" or "warn")."""
        return self.saved.inconclusive

    @property
    def check_params(self) -> tuple[Mapping[str, Any], ...]:
        """Each check's parameters, as the plan resolved them (the plan's own: read by name)."""
        return tuple(c.params for c in self.saved.checks)


@dataclass(frozen=True)
class RunRecord:
    """A run's, a set's or a fleet's run.json, checked: its keys as `RunDocument` types them,
    read through the properties below, and the whole document, saved again as it was read with
    the changes a writer asks for (`updated`)."""

    run: RunDir
    #: The keys qualify reads, checked.
    typed: RunDocument
    #: The plan's stages, each with the spec it was saved as.
    stages: tuple[StageEntry, ...]
    #: The stages the plan declares not applicable, each with its reason (plan.not_applicable).
    not_applicable: Mapping[str, str]
    #: Each `qualify report --rejudge` of the run, oldest first.
    rejudged: tuple[Rejudgement, ...]
    #: The whole document in the current layout, keys no type declares among them.
    document: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return self.typed.kind

    @property
    def status(self) -> str:
        return self.typed.status

    @property
    def run_id(self) -> str:
        return self.run.run_id if self.typed.run_id is None else self.typed.run_id

    @property
    def created_at(self) -> str:
        return self.typed.created_at

    @property
    def finished_at(self) -> str | None:
        return self.typed.finished_at

    @property
    def profile(self) -> str | None:
        return self.typed.profile

    @property
    def roles(self) -> Mapping[str, RoleInfo]:
        return self.typed.roles

    @property
    def members(self) -> tuple[Member, ...]:
        return tuple(m.member() for m in self.typed.members) if self.is_set else ()

    @property
    def set_label(self) -> str | None:
        """A set member's label in its set, None for a run that is not a member."""
        return self.typed.set_entry.label if self.typed.set_entry else None

    @property
    def provenance(self) -> Provenance:
        return self.typed.provenance

    @property
    def project_root(self) -> str | None:
        """The project the run was made from (its folder, as the run recorded it)."""
        return self.typed.project.root

    @property
    def builtin_plan(self) -> bool:
        """Whether the run's plan was qualify's own (plan.builtin)."""
        return self.typed.plan.builtin

    @property
    def plan_files(self) -> RecordedPlanFiles | None:
        """The plan's files as the run was made with them (None: a run made before they were kept)."""
        return self.typed.plan_files

    @property
    def options(self) -> RunOptions:
        return self.typed.options

    @property
    def timings(self) -> Mapping[str, float]:
        """Each stage's wall time in seconds, by name."""
        return self.typed.timings

    @property
    def invocations(self) -> tuple[Mapping[str, Any], ...]:
        """Each `qualify run` of the run, as it was asked for."""
        return tuple(self.typed.invocations)

    @property
    def containment(self) -> RecordedContainment | None:
        """How its commands were held, and what the host could not give (None: not recorded)."""
        return self.typed.containment

    @property
    def candidate_arm(self) -> str | None:
        role = self.roles.get(CANDIDATE)
        return role.arm if role else None

    @property
    def is_set(self) -> bool:
        return self.kind == "set"

    @property
    def origin(self) -> Origin:
        """Where the run was made (host, source, GPUs)."""
        return origin(self.provenance)

    # The provenance's parts the reports print.
    @property
    def git(self) -> RecordedGit:
        return self.provenance.git

    @property
    def host(self) -> RecordedHost:
        return self.provenance.host

    @property
    def gpus(self) -> list[RecordedGpu]:
        return list(self.provenance.gpus)

    @staticmethod
    def load(run: RunDir) -> RunRecord:
        """The record of `run`, refused (naming the file and the key) when it does not hold."""
        return RunRecord.parse(run, read_json(run.run_json, newest=RECORD_VERSION))

    @staticmethod
    def parse(run: RunDir, document: Mapping[str, Any]) -> RunRecord:
        """`document` (as read, of any version qualify knows, or as a writer built it) checked."""
        where = str(run.run_json)
        document = migrate(RUN_STEPS, document, where)
        check_saved_labels(document, where)
        typed = RunDocument.read(document, where)
        for role in typed.roles:
            if name_problem(role) is not None:
                raise RunStoreError(f"{where}: roles.{role} is not a role of a run", HINT)
        return RunRecord(
            run=run,
            typed=typed,
            stages=_stages(typed.plan, document, where),
            not_applicable=_not_applicable(typed.plan, where),
            rejudged=rejudgements(document, where),
            document=document,
        )

    def to_json(self) -> dict[str, Any]:
        """The document to save (no `schema_version`: `save` stamps it), every key it was read
        with kept."""
        return copy.deepcopy(dict(self.document))

    def updated(self, *, drop: Sequence[str] = (), **changes: Any) -> RunRecord:
        """This record with `changes` to its document's keys (and the keys `drop` removed),
        checked again."""
        document = {k: v for k, v in self.to_json().items() if k not in drop}
        return RunRecord.parse(self.run, {**document, **changes})

    def save(self, path: Path | None = None) -> None:
        """Write the record to `path` (its own run.json by default) atomically, at the current
        version. It was checked when it was parsed, so a record no reader would accept is never
        written. A writer whose lock was removed or replaced stops here instead (LockLostError)."""
        target = path or self.run.run_json
        check_writer(target)
        write_json(target, self.to_json(), version=RECORD_VERSION)
        seal.note(target)


def update_run(run: RunDir, *, drop: Sequence[str] = (), **changes: Any) -> RunRecord:
    """Read `run`'s run.json as its record, apply `changes` to its keys, check it and save it
    (the caller holds the run's lock); the record saved."""
    record = RunRecord.load(run).updated(drop=drop, **changes)
    record.save()
    return record


def _not_applicable(plan: RecordedPlan, where: str) -> dict[str, str]:
    """plan.not_applicable: stage name -> reason, neither empty (a record before it had none)."""
    if not all(k and v for k, v in plan.not_applicable.items()):
        raise RunStoreError(f"{where}: plan.not_applicable is not a table of stage names and reasons", HINT)
    return {k: clean(v) for k, v in plan.not_applicable.items()}


def _stages(plan: RecordedPlan, document: Mapping[str, Any], where: str) -> tuple[StageEntry, ...]:
    """The plan's stages, each with the spec it was saved as (`document`'s plan.stages)."""
    specs = document["plan"]["stages"] if plan.stages else []
    out = []
    for index, (stage, spec) in enumerate(zip(plan.stages, specs, strict=True)):
        # A stage's folder is read and written inside the run: it must be a plain name.
        problem = name_problem(stage.folder)
        if problem is not None or not stage.name:
            raise RunStoreError(
                f"{where}: plan.stages[{index}] folder {stage.folder!r}: {problem or 'no name'}", HINT
            )
        out.append(StageEntry(stage, spec))
    return tuple(out)
