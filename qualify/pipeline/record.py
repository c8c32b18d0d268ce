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

from qualify.core.errors import RunStoreError
from qualify.core.labels import check_saved_labels, name_problem
from qualify.core.runstore import RECORD_VERSION, RunDir, read_json, write_json
from qualify.core.verdicts import StageState, Verdict
from qualify.pipeline.members import Member
from qualify.pipeline.migrations import RESULT_STEPS, RUN_STEPS, STAGE_STEPS, migrate

KINDS = ("run", "set", "fleet")
STATUSES = ("running", "complete", "interrupted", "failed")
#: A check's verdict; a stage's is one of them or BLOCKED (never measured: its gate failed).
VERDICTS = tuple(v.value for v in Verdict)
STAGE_VERDICTS = (*VERDICTS, StageState.BLOCKED.value)
_HINT = "this run folder was not written by qualify as it is; use the run it came from"
#: Fields that are not the document's keys.
_NOT_KEYS = ("run", "path", "document")


class _Document:
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
        version; it is checked first, so a record no reader would accept is never written."""
        document = self.to_json()
        self._parse(document)
        write_json(path or self._file(), document, version=RECORD_VERSION)


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


@dataclass(frozen=True)
class RunRecord(_Document):
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
    #: The whole document in the current layout, for fields no accessor covers yet.
    document: Mapping[str, Any] = field(default_factory=dict)

    @property
    def candidate_arm(self) -> str | None:
        role = self.roles.get("candidate")
        return role.arm if role else None

    @property
    def is_set(self) -> bool:
        return self.kind == "set"

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
        kind = _word(document.get("kind", "run"), KINDS, where, "kind")
        status = _word(document.get("status", "running"), STATUSES, where, "status")
        entry = document.get("set")
        return RunRecord(
            run=run,
            kind=kind,
            status=status,
            run_id=str(document.get("run_id", run.run_id)),
            created_at=str(document.get("created_at", "")),
            finished_at=_text(document.get("finished_at")),
            profile=_text(document.get("profile")),
            roles=_roles(document.get("roles", {}), where),
            stages=_stages(document.get("plan", {}), where),
            members=tuple(Member.from_json(m) for m in document.get("members", [])) if kind == "set" else (),
            set_label=str(entry["label"]) if isinstance(entry, Mapping) else None,
            provenance=_mapping(document.get("provenance", {}), where, "provenance"),
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


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _mapping(value: Any, where: str, key: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RunStoreError(f"{where}: {key!r} is not an object", _HINT)
    return value


def _roles(value: Any, where: str) -> dict[str, RoleRecord]:
    roles = _mapping(value, where, "roles")
    out = {}
    for role, info in roles.items():
        if name_problem(str(role)) is not None or not isinstance(info, Mapping):
            raise RunStoreError(f"{where}: roles.{role} is not a role of a run", _HINT)
        out[str(role)] = RoleRecord(
            role=str(role),
            arm=str(info.get("arm", "")),
            installable=str(info.get("installable", "")),
            devshell=_text(info.get("devshell")),
            drv=_text(info.get("drv")),
            out=_text(info.get("out")),
        )
    return out


def _stages(value: Any, where: str) -> tuple[StageEntry, ...]:
    plan = _mapping(value, where, "plan")
    specs = plan.get("stages", [])
    if not isinstance(specs, list):
        raise RunStoreError(f"{where}: plan.stages is not a list", _HINT)
    out = []
    for index, spec in enumerate(specs):
        if not isinstance(spec, Mapping):
            raise RunStoreError(f"{where}: plan.stages[{index}] is not a stage", _HINT)
        name, folder = str(spec.get("name", "")), str(spec.get("folder", ""))
        # A stage's folder is read and written inside the run: it must be a plain name.
        problem = name_problem(folder)
        if problem is not None or not name:
            raise RunStoreError(
                f"{where}: plan.stages[{index}] folder {folder!r}: {problem or 'no name'}", _HINT
            )
        out.append(StageEntry(name, folder, spec))
    return tuple(out)


def _word(value: Any, words: tuple[str, ...], where: str | Path, key: str) -> str:
    if value not in words:
        raise RunStoreError(f"{where}: {key} {value!r} is not one of {', '.join(words)}", _HINT)
    return str(value)


@dataclass(frozen=True)
class CheckEntry:
    """A check as its stage.json lists it: name, kind, verdict and why."""

    name: str
    kind: str
    verdict: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StageRecord(_Document):
    """A stage's stage.json, checked: its status, verdict and checks as one attempt saved them."""

    path: Path
    name: str
    folder: str
    status: str
    verdict: str | None
    reason: str
    attempt: int | None
    inputs_hash: str | None
    inconclusive: str | None
    ungated: bool
    stale: bool
    spec: Mapping[str, Any] | None
    checks: tuple[CheckEntry, ...]
    duration_s: float | None
    document: Mapping[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @staticmethod
    def load(path: Path) -> StageRecord:
        """stage.json at `path` (RunStoreError naming it when it does not read or hold)."""
        return StageRecord.parse(path, read_json(path, newest=RECORD_VERSION))

    @staticmethod
    def parse(path: Path, document: Mapping[str, Any]) -> StageRecord:
        """`document`, the stage.json at `path` (as read, or as a writer built it), checked."""
        document = migrate(STAGE_STEPS, document, str(path))
        entries = document.get("checks", [])
        if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
            raise RunStoreError(f"{path}: 'checks' is not a list of checks", _HINT)
        checks = []
        for index, entry in enumerate(entries):
            name = str(entry.get("name", ""))
            if name_problem(name) is not None:
                # A check's name is a folder beside stage.json: it must be a plain name.
                raise RunStoreError(f"{path}: checks[{index}] name {name!r}: {name_problem(name)}", _HINT)
            verdict = _word(entry.get("verdict"), VERDICTS, path, f"checks[{index}] verdict")
            checks.append(CheckEntry(name, str(entry.get("kind", "")), verdict, str(entry.get("reason", ""))))
        folder = str(document.get("folder", path.parent.name))
        if (problem := name_problem(folder)) is not None:
            raise RunStoreError(f"{path}: folder {folder!r}: {problem}", _HINT)
        saved = document.get("verdict")
        spec = document.get("spec")
        attempt = document.get("attempt")
        duration = document.get("duration_s")
        return StageRecord(
            path=path,
            name=str(document.get("name", "")),
            folder=folder,
            status=str(document.get("status", "")),
            verdict=None if saved is None else _word(saved, STAGE_VERDICTS, path, "verdict"),
            reason=str(document.get("reason", "")),
            attempt=attempt if isinstance(attempt, int) else None,
            inputs_hash=_text(document.get("inputs_hash")),
            inconclusive=_text(document.get("inconclusive")),
            ungated=bool(document.get("ungated")),
            stale=bool(document.get("stale")),
            spec=spec if isinstance(spec, Mapping) else None,
            checks=tuple(checks),
            duration_s=float(duration) if isinstance(duration, (int, float)) else None,
            document=document,
        )

    def with_check(self, entry: CheckEntry) -> StageRecord:
        """This record with one more check listed."""
        return self.updated(checks=[*self.to_json().get("checks", []), entry.to_json()])

    def _parse(self, document: Mapping[str, Any]) -> StageRecord:
        return StageRecord.parse(self.path, document)

    def _put(self, out: dict[str, Any], name: str, value: Any) -> None:
        if name == "checks":
            out["checks"] = [c.to_json() for c in value]
        elif name == "stale" and not value:
            out.pop("stale", None)
        else:
            super()._put(out, name, value)


@dataclass(frozen=True)
class CheckResult(_Document):
    """A check's result.json, checked: its verdict and the evidence the report shows."""

    path: Path
    check: str
    kind: str
    verdict: str
    reason: str
    verdict_rules: str
    ungated: bool
    duration_s: float | None
    inputs_hash: str | None
    crashed: str | None
    findings: tuple[Mapping[str, Any], ...]
    tables: tuple[Mapping[str, Any], ...]
    charts: tuple[Mapping[str, Any], ...]
    judged: tuple[str, ...]
    facts: Mapping[str, Any]
    rejudged_at: str | None
    document: Mapping[str, Any] = field(default_factory=dict)

    @property
    def limits_of_evidence(self) -> list[str]:
        return [str(n) for n in self.facts.get("limits_of_evidence", [])]

    @staticmethod
    def load(path: Path) -> CheckResult:
        """result.json at `path` (RunStoreError naming it when it does not read or hold)."""
        return CheckResult.parse(path, read_json(path, newest=RECORD_VERSION))

    @staticmethod
    def parse(path: Path, document: Mapping[str, Any]) -> CheckResult:
        """`document`, the result.json at `path` (as read, or as a writer built it), checked."""
        document = migrate(RESULT_STEPS, document, str(path))
        duration = document.get("duration_s")
        facts = document.get("facts", {})
        return CheckResult(
            path=path,
            check=str(document.get("check", path.parent.name)),
            kind=str(document.get("kind", "")),
            verdict=_word(document.get("verdict"), VERDICTS, path, "verdict"),
            reason=str(document.get("reason", "")),
            verdict_rules=str(document.get("verdict_rules", "")),
            ungated=bool(document.get("ungated")),
            duration_s=float(duration) if isinstance(duration, (int, float)) else None,
            inputs_hash=_text(document.get("inputs_hash")),
            crashed=_text(document.get("crashed")),
            findings=_objects(document, "findings", path),
            tables=_objects(document, "tables", path),
            charts=_objects(document, "charts", path),
            judged=tuple(str(j) for j in document.get("judged", []) or []),
            facts=facts if isinstance(facts, Mapping) else {},
            rejudged_at=_text(document.get("rejudged_at")),
            document=document,
        )

    def _parse(self, document: Mapping[str, Any]) -> CheckResult:
        return CheckResult.parse(self.path, document)


def _objects(document: Mapping[str, Any], key: str, path: Path) -> tuple[Mapping[str, Any], ...]:
    value = document.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise RunStoreError(f"{path}: {key!r} is not a list of objects", _HINT)
    return tuple(value)
