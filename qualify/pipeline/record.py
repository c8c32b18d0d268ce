"""A run folder's records read as types: run.json, stage.json and result.json, checked on load.

A run folder may come from another host (`qualify merge`), from an older qualify, or from a
hand that edited it; what it says is read once, here, and checked before anything is read or
written through it: the document's version, its kind and status words, its roles, its plan's
stages (their names and folders) and every label that names a folder. A reader asks the record
(`candidate_arm`, `stages`, `members`), never the dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.core.errors import RunStoreError
from qualify.core.labels import check_saved_labels, name_problem
from qualify.core.runstore import RunDir, read_json
from qualify.pipeline.members import Member

KINDS = ("run", "set", "fleet")
STATUSES = ("running", "complete", "interrupted", "failed")
_HINT = "this run folder was not written by qualify as it is; use the run it came from"


@dataclass(frozen=True)
class RoleRecord:
    """An arm as it played a role in the run, with what its build learned."""

    role: str
    arm: str
    installable: str
    devshell: str | None = None
    drv: str | None = None
    out: str | None = None


@dataclass(frozen=True)
class StageEntry:
    """A stage of the plan the run records: its name, its folder and the spec it ran with."""

    name: str
    folder: str
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class RunRecord:
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
    #: The whole document, for fields no accessor covers yet.
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
        return RunRecord.parse(run, run.read())

    @staticmethod
    def parse(run: RunDir, document: Mapping[str, Any]) -> RunRecord:
        where = str(run.run_json)
        check_saved_labels(document, where)
        kind = str(document.get("kind", "run"))
        if kind not in KINDS:
            raise RunStoreError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}", _HINT)
        status = document.get("status", "running")
        if status not in STATUSES:
            raise RunStoreError(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}", _HINT)
        entry = document.get("set")
        return RunRecord(
            run=run,
            kind=kind,
            status=str(status),
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


@dataclass(frozen=True)
class CheckEntry:
    """A check as its stage.json lists it: name, kind, verdict and why."""

    name: str
    kind: str
    verdict: str
    reason: str


@dataclass(frozen=True)
class StageRecord:
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
        document = read_json(path)
        entries = document.get("checks", [])
        if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
            raise RunStoreError(f"{path}: its list of checks does not read", _HINT)
        checks = []
        for entry in entries:
            name = str(entry.get("name", ""))
            if name_problem(name) is not None:
                # A check's name is a folder beside stage.json: it must be a plain name.
                raise RunStoreError(f"{path}: check {name!r}: {name_problem(name)}", _HINT)
            checks.append(
                CheckEntry(
                    name,
                    str(entry.get("kind", "")),
                    str(entry.get("verdict", "")),
                    str(entry.get("reason", "")),
                )
            )
        spec = document.get("spec")
        attempt = document.get("attempt")
        duration = document.get("duration_s")
        return StageRecord(
            path=path,
            name=str(document.get("name", "")),
            folder=str(document.get("folder", path.parent.name)),
            status=str(document.get("status", "")),
            verdict=_text(document.get("verdict")),
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


@dataclass(frozen=True)
class CheckResult:
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
        document = read_json(path)
        duration = document.get("duration_s")
        facts = document.get("facts", {})
        return CheckResult(
            path=path,
            check=str(document.get("check", path.parent.name)),
            kind=str(document.get("kind", "")),
            verdict=str(document.get("verdict", "")),
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


def _objects(document: Mapping[str, Any], key: str, path: Path) -> tuple[Mapping[str, Any], ...]:
    value = document.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise RunStoreError(f"{path}: {key!r} is not a list of objects", _HINT)
    return tuple(value)
