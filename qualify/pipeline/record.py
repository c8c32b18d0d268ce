"""A run folder's records as types: run.json, stage.json and result.json, checked on load and
written through them.

A run folder may come from another host (`qualify merge`), from an older qualify, or from a
hand that edited it; what it says is read once, here, and checked before anything is read or
written through it: its version (an older layout is read as the current one, the file left as
it is: `qualify.pipeline.migrations`), its kind, status and verdict words, its roles, its plan's
stages (their names and folders) and every label that names a folder; run.json's keys are
checked as the types of `qualify.pipeline.rundocument` declare them. A reader asks the record
(`candidate_arm`, `stages`, `members`), never the dict. A writer has the document it builds
checked (`parse`) and saves the record (`save`: atomic, at the current version), or changes a
saved one (`updated`, `update_run`). A record keeps its whole document: keys no field covers
are saved again as they were read; a field changed on the record is written over its key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Self, get_args

from qualify.checks.base import CANDIDATE
from qualify.checks.evidence import HINT
from qualify.checks.refusals import plain
from qualify.checks.runoptions import RunOptions
from qualify.core import seal
from qualify.core.errors import RunStoreError
from qualify.core.labels import check_saved_labels, name_problem
from qualify.core.plaintext import clean
from qualify.core.provenance import RecordedGpu
from qualify.core.runstore import RECORD_VERSION, RunDir, check_writer, read_json, write_json
from qualify.pipeline.members import Member
from qualify.pipeline.migrations import RUN_STEPS, migrate
from qualify.pipeline.recordparts import Origin, Provenance, RecordedGit, RecordedHost, origin
from qualify.pipeline.rejudgements import Rejudgement, rejudgements
from qualify.pipeline.rundocument import (
    RecordedContainment,
    RecordedPlan,
    RecordedPlanFiles,
    RoleInfo,
    RunDocument,
    Status,
)

#: The statuses a writer may save (`ondisk` reads a dead writer's as "dead").
STATUSES: tuple[str, ...] = get_args(Status)
#: Fields that are not the document's keys.
_NOT_KEYS = ("run", "path", "document")


class Document:
    """What the three records share: their document out, changed by key, and saved."""

    document: Mapping[str, Any]
    path: Path  # a stage's or a check's file (a run's record names its own: `_file`)

    def _parse(self, document: Mapping[str, Any]) -> Self:  # `document` as this record's kind
        raise NotImplementedError

    def _file(self) -> Path:
        return self.path

    def _put(self, out: dict[str, Any], name: str, value: Any) -> None:
        out[name] = plain(value)

    def _as_read(self) -> bool:
        """Whether the fields are what `document` parses to: a record as `parse` made it, not a
        copy whose fields were changed (`dataclasses.replace`)."""
        return False

    def to_json(self) -> dict[str, Any]:
        """The document to save (no `schema_version`: `save` stamps it), every key it was read
        with kept, and each field that differs from what the document says written over it."""
        out = copy.deepcopy(dict(self.document))
        if self._as_read():
            return out  # its fields are the document's: nothing to write over it
        derived = self._parse(self.document)
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name not in _NOT_KEYS and value != getattr(derived, f.name):
                self._put(out, f.name, value)
        return out

    def updated(self, *, drop: Sequence[str] = (), **changes: Any) -> Self:
        """This record with `changes` to its document's keys (and the keys `drop` removed),
        checked again."""
        document = {k: v for k, v in self.to_json().items() if k not in drop}
        return self._parse({**document, **changes})

    def save(self, path: Path | None = None) -> None:
        """Write the record to `path` (its own file by default) atomically, at the current
        version; it is checked first, so a record no reader would accept is never written. A
        writer whose lock was removed or replaced stops here instead (LockLostError)."""
        document = self.to_json()
        if not self._as_read():
            self._parse(document)  # a record as parsed was checked when it was
        target = path or self._file()
        check_writer(target)
        write_json(target, document, version=RECORD_VERSION)
        seal.note(target)


@dataclass(frozen=True)
class StageEntry:
    """A stage of the plan the run records: its name, its folder and the spec it ran with."""

    name: str
    folder: str
    #: The stage as saved (compared whole with its stage.json's, and saved again as it was).
    spec: Mapping[str, Any]
    #: The stage's file in the project, as the plan named it (None: not recorded).
    file: str | None = None
    #: Each check's parameters, as the plan resolved them (the plan's own: read by name).
    check_params: tuple[Mapping[str, Any], ...] = ()
    #: How an INCONCLUSIVE check counts in the stage's verdict ("fail" or "warn").
    inconclusive: str = "fail"


@dataclass(frozen=True)
class RunRecord(Document):
    """A run's, a set's or a fleet's run.json, checked."""

    run: RunDir
    kind: str
    status: str
    run_id: str
    created_at: str
    finished_at: str | None
    profile: str | None
    roles: dict[str, RoleInfo]
    stages: tuple[StageEntry, ...]
    members: tuple[Member, ...]
    #: A set member's label in its set, None for a run that is not a member.
    set_label: str | None
    provenance: Provenance = field(default_factory=Provenance)
    #: The stages the plan declares not applicable, each with its reason (plan.not_applicable).
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    #: Each `qualify report --rejudge` of the run, oldest first.
    rejudged: tuple[Rejudgement, ...] = ()
    #: The project the run was made from (its folder, as the run recorded it).
    project_root: str | None = None
    #: Whether the run's plan was qualify's own (plan.builtin).
    builtin_plan: bool = False
    #: The plan's files as the run was made with them (None: a run made before they were kept).
    plan_files: RecordedPlanFiles | None = None
    options: RunOptions = field(default_factory=RunOptions)
    #: Each stage's wall time in seconds, by name.
    timings: Mapping[str, float] = field(default_factory=dict)
    #: Each `qualify run` of the run, as it was asked for.
    invocations: tuple[Mapping[str, Any], ...] = ()
    #: How its commands were held, and what the host could not give (None: not recorded).
    containment: RecordedContainment | None = None
    #: The whole document in the current layout, for fields no accessor covers yet.
    document: Mapping[str, Any] = field(default_factory=dict)
    #: Set by `parse` alone: a copy made with `dataclasses.replace` (whose fields may differ
    #: from its document) starts without it, so run.json is parsed once per read and once per
    #: update, not again to find what a record as read would change.
    _parsed: bool = field(default=False, init=False, repr=False, compare=False)

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
        record = RunRecord(
            run=run,
            kind=typed.kind,
            status=typed.status,
            run_id=run.run_id if typed.run_id is None else typed.run_id,
            created_at=typed.created_at,
            finished_at=typed.finished_at,
            profile=typed.profile,
            roles=dict(typed.roles),
            stages=_stages(typed.plan, document, where),
            members=tuple(m.member() for m in typed.members) if typed.kind == "set" else (),
            set_label=typed.set_entry.label if typed.set_entry else None,
            provenance=typed.provenance,
            not_applicable=_not_applicable(typed.plan, where),
            rejudged=rejudgements(document, where),
            project_root=typed.project.root,
            builtin_plan=typed.plan.builtin,
            plan_files=typed.plan_files,
            options=typed.options,
            timings=dict(typed.timings),
            invocations=tuple(typed.invocations),
            containment=typed.containment,
            document=document,
        )
        object.__setattr__(record, "_parsed", True)
        return record

    def _parse(self, document: Mapping[str, Any]) -> RunRecord:
        return RunRecord.parse(self.run, document)

    def _as_read(self) -> bool:
        return self._parsed

    def _file(self) -> Path:
        return self.run.run_json

    def _put(self, out: dict[str, Any], name: str, value: Any) -> None:
        plan = out.setdefault("plan", {}) if name in ("stages", "not_applicable", "builtin_plan") else {}
        if name == "roles":
            saved = out.get("roles", {})
            out["roles"] = {
                r: {**saved.get(r, {}), **role.model_dump(mode="json")} for r, role in value.items()
            }
        elif name == "stages":
            plan["stages"] = [{**plain(s.spec), "name": s.name, "folder": s.folder} for s in value]
        elif name == "not_applicable":
            plan["not_applicable"] = dict(value)
        elif name == "builtin_plan":
            plan["builtin"] = value
        elif name == "containment":
            out[name] = value.model_dump(exclude_none=True) if value is not None else None
        elif name in ("provenance", "options"):
            out[name] = value.as_json()
        elif name == "plan_files":
            out[name] = value.model_dump() if value is not None else None
        elif name == "rejudged":
            out["rejudged"] = [r.as_json() for r in value]
        elif name == "project_root":
            out.setdefault("project", {})["root"] = value
        elif name == "members":
            out["members"] = [m.as_json() for m in value]
        elif name == "set_label":
            if value is None:
                out.pop("set", None)
            else:
                out["set"] = {**out.get("set", {}), "label": value}
        else:
            super()._put(out, name, value)


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
        params = tuple(c.params for c in stage.checks)
        out.append(StageEntry(stage.name, stage.folder, spec, stage.file, params, stage.inconclusive))
    return tuple(out)
