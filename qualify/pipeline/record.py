"""A run folder's records as types: run.json, stage.json and result.json, checked on load and
written through them.

A run folder may come from another host (`qualify merge`), from an older qualify, or from a
hand that edited it; what it says is read once, here, and checked before anything is read or
written through it: its version (an older layout is read as the current one, the file left as
it is: `qualify.pipeline.migrations`), its kind, status and verdict words, its roles, its plan's
stages (their names and folders) and every label that names a folder. A reader asks the record
(`candidate_arm`, `stages`, `members`), never the dict. A writer has the document it builds
checked (`parse`) and saves the record (`save`: atomic, at the current version), or changes a
saved one (`updated`, `update_run`). A record keeps its whole document: keys no field covers
are saved again as they were read; a field changed on the record is written over its key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Self

from qualify.core import seal
from qualify.core.errors import RunStoreError
from qualify.core.labels import check_saved_labels, name_problem
from qualify.core.plaintext import clean
from qualify.core.runstore import RECORD_VERSION, RunDir, check_writer, read_json, write_json
from qualify.pipeline.members import Member
from qualify.pipeline.migrations import RUN_STEPS, migrate
from qualify.pipeline.recordfields import (
    HINT,
    a_list,
    is_object,
    is_str,
    mapping,
    number,
    string,
    text,
    word,
    wrong,
)
from qualify.pipeline.recordparts import Origin, origin
from qualify.pipeline.rejudgements import Rejudgement, rejudgements

KINDS = ("run", "set", "fleet")
STATUSES = ("running", "complete", "interrupted", "failed")
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
        out[name] = _plain(value)

    def to_json(self) -> dict[str, Any]:
        """The document to save (no `schema_version`: `save` stamps it), every key it was read
        with kept, and each field that differs from what the document says written over it."""
        out = copy.deepcopy(dict(self.document))
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
        self._parse(document)
        target = path or self._file()
        check_writer(target)
        write_json(target, document, version=RECORD_VERSION)
        seal.note(target)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class RoleRecord:
    """An arm as it played a role in the run, with what its build learned."""

    role: str
    arm: str
    installable: str
    devshell: str | None = None
    drv: str | None = None
    out: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "role"}


@dataclass(frozen=True)
class StageEntry:
    """A stage of the plan the run records: its name, its folder and the spec it ran with."""

    name: str
    folder: str
    spec: Mapping[str, Any]
    #: The stage's file in the project, as the plan named it (None: not recorded).
    file: str | None = None
    #: Each check's parameters, as the plan resolved them (the plan's own: read by name).
    check_params: tuple[Mapping[str, Any], ...] = ()


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
    roles: dict[str, RoleRecord]
    stages: tuple[StageEntry, ...]
    members: tuple[Member, ...]
    #: A set member's label in its set, None for a run that is not a member.
    set_label: str | None
    provenance: Mapping[str, Any] = field(default_factory=dict)
    #: The stages the plan declares not applicable, each with its reason (plan.not_applicable).
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    #: Each `qualify report --rejudge` of the run, oldest first.
    rejudged: tuple[Rejudgement, ...] = ()
    #: The project the run was made from (its folder, as the run recorded it).
    project_root: str | None = None
    #: The whole document in the current layout, for fields no accessor covers yet.
    document: Mapping[str, Any] = field(default_factory=dict)

    @property
    def candidate_arm(self) -> str | None:
        role = self.roles.get("candidate")
        return role.arm if role else None

    @property
    def is_set(self) -> bool:
        return self.kind == "set"

    @property
    def origin(self) -> Origin:
        """Where the run was made (host, source, GPUs), each field's type checked."""
        return origin(self.provenance, str(self.run.run_json))

    @property
    def builtin_plan(self) -> bool:
        """Whether the run's plan was qualify's own (plan.builtin)."""
        return bool(mapping(self.document.get("plan", {}), str(self.run.run_json), "plan").get("builtin"))

    # The provenance's parts the reports print (their shapes checked on load: `_provenance`).
    @property
    def git(self) -> Mapping[str, Any]:
        return mapping(self.provenance.get("git", {}), str(self.run.run_json), "provenance.git")

    @property
    def host(self) -> Mapping[str, Any]:
        return mapping(self.provenance.get("host", {}), str(self.run.run_json), "provenance.host")

    @property
    def gpus(self) -> list[Mapping[str, Any]]:
        return list(self.provenance.get("gpus", []))

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
        kind = word(document.get("kind", "run"), KINDS, where, "kind")
        status = word(document.get("status", "running"), STATUSES, where, "status")
        _check_sequence(document.get("sequence"), where)
        entry = document.get("set")
        return RunRecord(
            run=run,
            kind=kind,
            status=status,
            run_id=str(document.get("run_id", run.run_id)),
            created_at=_created_at(document.get("created_at", ""), where),
            finished_at=string(document, "finished_at", where),
            profile=string(document, "profile", where),
            roles=_roles(document.get("roles", {}), where),
            stages=_stages(document.get("plan", {}), where),
            members=_members(document, where) if kind == "set" else (),
            set_label=str(entry["label"]) if isinstance(entry, Mapping) else None,
            provenance=_provenance(document.get("provenance", {}), where),
            not_applicable=_not_applicable(document.get("plan", {}), where),
            rejudged=rejudgements(document, where),
            project_root=_project_root(document, where),
            document=document,
        )

    def _parse(self, document: Mapping[str, Any]) -> RunRecord:
        return RunRecord.parse(self.run, document)

    def _file(self) -> Path:
        return self.run.run_json

    def _put(self, out: dict[str, Any], name: str, value: Any) -> None:
        if name == "roles":
            saved = out.get("roles", {})
            out["roles"] = {r: {**saved.get(r, {}), **role.to_json()} for r, role in value.items()}
        elif name == "stages":
            plan = out.setdefault("plan", {})
            plan["stages"] = [{**_plain(s.spec), "name": s.name, "folder": s.folder} for s in value]
        elif name == "not_applicable":
            out.setdefault("plan", {})["not_applicable"] = dict(value)
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


def _project_root(document: Mapping[str, Any], where: str) -> str | None:
    """The folder of the project the run was made from (`project.root`), None when not recorded."""
    return string(mapping(document.get("project", {}), where, "project"), "root", where, at="project.")


def _created_at(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RunStoreError(
            f"{where}: created_at {value!r} is not a time (qualify writes one as text, "
            "such as 2025-01-31T12:00:00+00:00)",
            "write the time the run was made there as such a text, or move this run folder out "
            "of the runs directory",
        )
    return value


def _check_sequence(value: Any, where: str) -> None:
    """The run's number in its runs directory (`runlist.new_run`), when it has one."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise RunStoreError(
            f"{where}: sequence {value!r} is not a run's number (a whole number from 1)",
            "remove the key (the run is then ordered by its name, before the numbered runs), "
            "or move this run folder out of the runs directory",
        )


def _provenance(value: Any, where: str) -> Mapping[str, Any]:
    """The host, source and GPUs a run recorded, in the shapes the reports print them from."""
    prov = mapping(value, where, "provenance")
    for key in ("host", "git", "tools", "flake_lock"):
        if key in prov:
            mapping(prov[key], where, f"provenance.{key}")
    host = prov.get("host", {})
    loadavg = host.get("loadavg")
    if loadavg is not None:
        a_list(loadavg, where, "provenance.host.loadavg", number, "a number")
    for index, gpu in enumerate(
        a_list(prov.get("gpus", []), where, "provenance.gpus", is_object, "an object")
    ):
        if gpu.get("firmware") is not None:
            mapping(gpu["firmware"], where, f"provenance.gpus[{index}].firmware")
    holders = a_list(prov.get("gpu_processes", []), where, "provenance.gpu_processes", is_object, "an object")
    for index, holder in enumerate(holders):
        at = f"provenance.gpu_processes[{index}]"
        if not number(holder.get("pid")):
            raise wrong(where, f"{at}.pid", holder.get("pid"), "a process id")
        if not isinstance(holder.get("command"), str):
            raise wrong(where, f"{at}.command", holder.get("command"), "a string")
        a_list(holder.get("devices"), where, f"{at}.devices", is_str, "a string")
    return prov


def _members(document: Mapping[str, Any], where: str) -> tuple[Member, ...]:
    """A set's members (their labels are checked by `check_saved_labels`)."""
    members = []
    for index, entry in enumerate(
        a_list(document.get("members", []), where, "members", is_object, "an object")
    ):
        at = f"members[{index}]"
        if not isinstance(entry.get("arm"), str):
            raise wrong(where, f"{at}.arm", entry.get("arm"), "an arm's name")
        if entry.get("role") not in ("candidate", "positive", "negative"):
            raise RunStoreError(
                f"{where}: {at}.role {entry.get('role')!r} is not candidate, positive or negative", HINT
            )
        a_list(entry.get("must_fail", []), where, f"{at}.must_fail", is_str, "a string")
        members.append(Member.from_json(entry))
    return tuple(members)


def _roles(value: Any, where: str) -> dict[str, RoleRecord]:
    roles = mapping(value, where, "roles")
    out = {}
    for role, info in roles.items():
        if name_problem(str(role)) is not None or not isinstance(info, Mapping):
            raise RunStoreError(f"{where}: roles.{role} is not a role of a run", HINT)
        out[str(role)] = RoleRecord(
            role=str(role),
            arm=str(info.get("arm", "")),
            installable=str(info.get("installable", "")),
            devshell=text(info.get("devshell")),
            drv=text(info.get("drv")),
            out=text(info.get("out")),
        )
    return out


def _not_applicable(value: Any, where: str) -> dict[str, str]:
    """plan.not_applicable: stage name -> reason, both text (a record before it had none)."""
    declared = mapping(value, where, "plan").get("not_applicable", {})
    if not isinstance(declared, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in declared.items()
    ):
        raise RunStoreError(f"{where}: plan.not_applicable is not a table of stage names and reasons", HINT)
    return {k: clean(v) for k, v in declared.items()}


def _stages(value: Any, where: str) -> tuple[StageEntry, ...]:
    plan = mapping(value, where, "plan")
    specs = plan.get("stages", [])
    if not isinstance(specs, list):
        raise RunStoreError(f"{where}: plan.stages is not a list", HINT)
    out = []
    for index, spec in enumerate(specs):
        if not isinstance(spec, Mapping):
            raise RunStoreError(f"{where}: plan.stages[{index}] is not a stage", HINT)
        name, folder = str(spec.get("name", "")), str(spec.get("folder", ""))
        # A stage's folder is read and written inside the run: it must be a plain name.
        problem = name_problem(folder)
        if problem is not None or not name:
            raise RunStoreError(
                f"{where}: plan.stages[{index}] folder {folder!r}: {problem or 'no name'}", HINT
            )
        at = f"plan.stages[{index}]"
        checks = a_list(spec.get("checks", []), where, f"{at}.checks", is_object, "an object")
        params = tuple(
            mapping(c.get("params") or {}, where, f"{at}.checks[{i}].params") for i, c in enumerate(checks)
        )
        out.append(StageEntry(name, folder, spec, string(spec, "file", where, at=f"{at}."), params))
    return tuple(out)
