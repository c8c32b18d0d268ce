"""A stage's and a check's records as types: stage.json and result.json, checked on load and
written through them (see `qualify.pipeline.record` for what every record shares)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qualify.checks.evidence import Evidence
from qualify.checks.figures import Chart, Table, load_charts, load_tables
from qualify.checks.registry import evidence_types
from qualify.core.errors import RunStoreError
from qualify.core.labels import name_problem
from qualify.core.runstore import RECORD_VERSION, read_json
from qualify.pipeline.migrations import RESULT_STEPS, STAGE_STEPS, migrate
from qualify.pipeline.record import Document
from qualify.pipeline.recordfields import (
    HINT,
    STAGE_VERDICTS,
    VERDICTS,
    a_list,
    is_str,
    mapping,
    seconds,
    string,
    text,
    word,
    wrong,
)
from qualify.pipeline.resultparts import SavedFinding, saved_findings
from qualify.pipeline.resultspec import SavedSpec, saved_spec


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
class StageRecord(Document):
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
            raise RunStoreError(f"{path}: 'checks' is not a list of checks", HINT)
        checks = []
        for index, entry in enumerate(entries):
            name = str(entry.get("name", ""))
            if name_problem(name) is not None:
                # A check's name is a folder beside stage.json: it must be a plain name.
                raise RunStoreError(f"{path}: checks[{index}] name {name!r}: {name_problem(name)}", HINT)
            verdict = word(entry.get("verdict"), VERDICTS, path, f"checks[{index}] verdict")
            checks.append(CheckEntry(name, str(entry.get("kind", "")), verdict, str(entry.get("reason", ""))))
        folder = str(document.get("folder", path.parent.name))
        if (problem := name_problem(folder)) is not None:
            raise RunStoreError(f"{path}: folder {folder!r}: {problem}", HINT)
        saved = document.get("verdict")
        spec = document.get("spec")
        attempt = document.get("attempt")
        duration = document.get("duration_s")
        return StageRecord(
            path=path,
            name=str(document.get("name", "")),
            folder=folder,
            status=str(document.get("status", "")),
            verdict=None if saved is None else word(saved, STAGE_VERDICTS, path, "verdict"),
            reason=str(document.get("reason", "")),
            attempt=attempt if isinstance(attempt, int) else None,
            inputs_hash=text(document.get("inputs_hash")),
            inconclusive=text(document.get("inconclusive")),
            ungated=bool(document.get("ungated")),
            stale=bool(document.get("stale")),
            spec=spec if isinstance(spec, Mapping) else None,
            checks=tuple(checks),
            duration_s=seconds(duration),
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
class CheckResult(Document):
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
    findings: tuple[SavedFinding, ...]
    tables: tuple[Table, ...]
    charts: tuple[Chart, ...]
    judged: tuple[str, ...]
    facts: Mapping[str, Any]
    rejudged_at: str | None
    #: The stage the check is of, as the result names it ("" when it does not).
    stage: str
    #: The roles the check measured, by name.
    roles: tuple[str, ...]
    #: The check as it was measured: its kind, parameters and limits.
    spec: SavedSpec
    document: Mapping[str, Any] = field(default_factory=dict)
    #: The facts as the kind's type (`qualify.checks.evidence`), checked when the result was
    #: read; None for a kind whose facts are not typed.
    evidence: Evidence | None = None

    @property
    def limits_of_evidence(self) -> list[str]:
        return [str(n) for n in self.facts.get("limits_of_evidence", [])]

    @property
    def judged_as(self) -> str:
        """The kind of the check as it was judged: its saved spec's, else the result's."""
        spec = self.document.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise wrong(self.path, "spec", spec, "an object")
        kind = spec.get("kind", self.kind)
        if not isinstance(kind, str):
            raise wrong(self.path, "spec.kind", kind, "a string")
        return kind

    @staticmethod
    def load(path: Path) -> CheckResult:
        """result.json at `path` (RunStoreError naming it when it does not read or hold)."""
        return CheckResult.parse(path, read_json(path, newest=RECORD_VERSION))

    @staticmethod
    def parse(path: Path, document: Mapping[str, Any]) -> CheckResult:
        """`document`, the result.json at `path` (as read, or as a writer built it), checked."""
        document = migrate(RESULT_STEPS, document, str(path))
        return CheckResult(
            path=path,
            check=string(document, "check", path) or path.parent.name,
            kind=string(document, "kind", path) or "",
            verdict=word(document.get("verdict"), VERDICTS, path, "verdict"),
            reason=string(document, "reason", path) or "",
            verdict_rules=string(document, "verdict_rules", path) or "",
            ungated=bool(document.get("ungated")),
            duration_s=seconds(document.get("duration_s")),
            inputs_hash=string(document, "inputs_hash", path),
            crashed=string(document, "crashed", path),
            findings=saved_findings(document, path),
            tables=load_tables(document.get("tables", []), path),
            charts=load_charts(document.get("charts", []), path),
            judged=tuple(a_list(document.get("judged") or [], path, "judged", is_str, "a string")),
            facts=_facts(document, path),
            rejudged_at=string(document, "rejudged_at", path),
            stage=string(document, "stage", path) or "",
            roles=tuple(mapping(document.get("roles", {}), str(path), "roles")),
            spec=saved_spec(document, path),
            document=document,
            evidence=_evidence(string(document, "kind", path) or "", document, path),
        )

    def _parse(self, document: Mapping[str, Any]) -> CheckResult:
        return CheckResult.parse(self.path, document)

    def _put(self, out: dict[str, Any], name: str, value: Any) -> None:
        if name == "spec":
            out["spec"] = value.as_json()
        elif name == "findings":
            out["findings"] = [f.as_json() for f in value]
        elif name in ("tables", "charts"):
            out[name] = [figure.to_json() for figure in value]
        elif name == "roles":
            saved = out["roles"] if isinstance(out.get("roles"), Mapping) else {}
            out["roles"] = {r: saved.get(r, {}) for r in value}
        else:
            super()._put(out, name, value)


def _evidence(kind: str, document: Mapping[str, Any], path: Path) -> Evidence | None:
    types = evidence_types(kind)
    if types is None or not document.get("facts"):
        return None  # no judge wrote facts: the check crashed or was never measured
    return types.facts.load(document["facts"], path, "facts")


def _facts(document: Mapping[str, Any], path: Path) -> Mapping[str, Any]:
    facts = document.get("facts") or {}
    if not isinstance(facts, Mapping):
        raise wrong(path, "facts", facts, "an object")
    notes = facts.get("limits_of_evidence")
    if notes is not None:
        a_list(notes, path, "facts.limits_of_evidence", is_str, "a string")
    return facts
