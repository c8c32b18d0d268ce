"""The report's view model, built from the run directory alone (run.json, stage.json,
result.json): the HTML, the Markdown summary and report.json all render from it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from qualify import __version__
from qualify.checks.figures import Figure
from qualify.core.errors import RunStoreError
from qualify.core.redaction import redact_text
from qualify.core.runstore import SCHEMA_VERSION, RunDir
from qualify.core.verdicts import LEFT_OUT, StageState
from qualify.pipeline.ondisk import RunOnDisk, run_on_disk
from qualify.pipeline.stageorder import with_default_order
from qualify.records.provenance import RecordedGit
from qualify.records.rejudgements import Rejudgement
from qualify.records.result import CheckResult, SavedFinding
from qualify.records.run import RunRecord, StageEntry
from qualify.records.stage import CheckEntry, StageRecord
from qualify.report import headline
from qualify.report.views import CheckView, StageView, cause_line, shared_measurement


@dataclass(frozen=True)
class RoleView:
    role: str
    arm: str
    installable: str
    out: str | None


class _Noted(Protocol):
    """A view model as `VerdictView` reads it: a dataclass with a verdict and its note."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def verdict(self) -> str: ...
    @property
    def verdict_note(self) -> str: ...
    @property
    def verdict_line(self) -> str: ...


class VerdictView:
    """What a run's, a run set's and a fleet's view models say alike: the verdict as its line,
    and the whole view as report.json holds it."""

    @property
    def verdict_line(self: _Noted) -> str:
        """The verdict as a reviewer should read it: "QUALIFIED — bench undecided"."""
        return f"{self.verdict} — {self.verdict_note}" if self.verdict_note else self.verdict

    def as_json(self: _Noted) -> dict[str, Any]:
        document: dict[str, Any] = json_ready(asdict(self))
        return {**document, "verdict_line": self.verdict_line}


@dataclass(frozen=True)
class ReportModel(VerdictView):
    schema_version: int
    qualify_version: str
    run_id: str
    status: str
    verdict: str
    created_at: str
    finished_at: str | None
    profile: str | None
    roles: list[RoleView]
    source: RecordedGit
    host: dict[str, Any]
    gpus: list[dict[str, Any]]
    gpu_processes: list[dict[str, Any]]
    stages: list[StageView]
    not_proven: list[str]
    #: Each `qualify report --rejudge`: when, with which plan, which checks changed.
    rejudged: list[Rejudgement] = field(default_factory=list)
    #: What kept the verdict from a plain one ("bench undecided"), empty when nothing did.
    verdict_note: str = ""
    #: The reasons that decide the verdict, then what else a reviewer should read.
    reasons: list[str] = field(default_factory=list)
    to_read: list[str] = field(default_factory=list)
    #: The toolchain change from the build stage: ["CUDA 13.0.88 → 13.5.37"].
    toolchain: list[str] = field(default_factory=list)
    #: The source as recorded: git revision, else the flake's revision or narHash.
    source_line: str = "unknown"
    #: What did not protect this run's records from its commands: the protections the host could
    #: not give (run.json's `containment.missing`), and a seal that does not verify here.
    unprotected: list[str] = field(default_factory=list)

    @property
    def ungated(self) -> list[StageView]:
        return [s for s in self.stages if s.ungated]

    def role(self, name: str) -> RoleView | None:
        return next((r for r in self.roles if r.role == name), None)


def json_ready(value: Any) -> Any:
    """A view (`asdict` of it) as report.json saves it: the records' parts it holds (a
    finding, a rejudgement, a table, a chart) as they are saved."""
    if isinstance(value, Figure):
        return value.to_json()
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def build_model(run: RunDir) -> ReportModel:
    record = RunRecord.load(run)
    # Derived from the stages as they are now, never the verdict run.json saved; each stage's
    # view shows the outcome that derivation gave it (its files are read for it once).
    derived = run_on_disk(run, record)
    stages = [_stage(run, entry, derived) for entry in record.stages]
    present = {s.name for s in stages}
    stages += [
        StageView(name, None, StageState.NOT_APPLICABLE.value, why, False)
        for name, why in derived.reasons.items()
        if name not in present and derived.stages[name] is StageState.NOT_APPLICABLE
    ]
    present = {s.name for s in stages}
    stages += [
        StageView(name, None, StageState.NOT_CONFIGURED.value, derived.reasons.get(name, ""), False)
        for name, outcome in derived.stages.items()
        if name not in present and outcome is StageState.NOT_CONFIGURED
    ]
    stages = _merge_order(stages)
    # A run saved before installables were recorded redacted may hold a URL's token.
    roles = [
        RoleView(role, info.arm, redact_text(info.installable, known=False), info.out)
        for role, info in record.roles.items()
    ]
    status = derived.status
    verdict = "RUNNING" if status == "running" else derived.verdict.value
    model = ReportModel(
        schema_version=SCHEMA_VERSION,
        qualify_version=__version__,
        run_id=run.run_id,
        status=status,
        verdict=verdict,
        created_at=record.created_at,
        finished_at=record.finished_at,
        profile=record.profile,
        roles=roles,
        source=record.git,
        host=record.host.as_json(),
        gpus=[g.as_json() for g in record.gpus],
        gpu_processes=[p.as_json() for p in record.provenance.gpu_processes],
        stages=stages,
        not_proven=[],
        rejudged=list(record.rejudged),
    )
    last = record.rejudged[-1].changed if record.rejudged else ()
    presented = _presented(run, _with_limits_of_evidence(model), {(c.stage, c.check): c.before for c in last})
    return _with_protection(presented, record, derived)


def protection_missing(record: RunRecord) -> list[str]:
    """The protections the host could not give the run's commands, as run.json recorded them
    (a set's member: as its set's did, which held them)."""
    held = record.containment
    if held is None and record.set_label is not None and (record.run.path.parent / "run.json").is_file():
        held = RunRecord.load(RunDir(record.run.path.parent)).containment
    missing = held.missing if held is not None else None
    return [f"not given here: {missing}"] if missing else []


def _with_protection(model: ReportModel, record: RunRecord, derived: RunOnDisk) -> ReportModel:
    """The protections the run lacked and how its seal reads, on the report's first screen; and
    why a run whose stages passed is not QUALIFIED, where its seal or its last attempt is why."""
    unprotected = protection_missing(record)
    if derived.seal and derived.seal != "sealed and verified":
        unprotected.append(derived.seal)
    note = model.verdict_note
    if derived.unfinished is not None and derived.unfinished not in note:
        measured_nothing = note == "no stage but the build measured the engine"
        note = derived.unfinished if measured_nothing or not note else f"{derived.unfinished}; {note}"
    return replace(model, unprotected=unprotected, verdict_note=note)


def _presented(run: RunDir, model: ReportModel, changed: Mapping[tuple[str, str], str]) -> ReportModel:
    """The reviewer's lines (`qualify.report.headline`), from the stages as built above, each
    check the last rejudgement changed marked with its verdict before (`changed`)."""
    stages = []
    for built in model.stages:
        checks = [replace(c, rejudged_from=changed.get((built.name, c.name))) for c in built.checks]
        stage = replace(built, checks=checks)
        stages.append(replace(stage, why=headline.stage_why(stage), undecided=headline.undecided(stage)))
    deciding, to_read = headline.reasons(stages)
    return replace(
        model,
        stages=stages,
        verdict_note=headline.verdict_note(stages, model.verdict),
        reasons=deciding,
        to_read=to_read,
        toolchain=headline.toolchain_delta(stages),
        source_line=headline.source_line(run, model.source, stages),
    )


def _merge_order(stages: list[StageView]) -> list[StageView]:
    """Configured stages in plan order; NOT CONFIGURED and NOT APPLICABLE ones where the
    default order puts them (`with_default_order`); a stage of the project's own that does not
    apply, last."""
    by_name = {s.name: s for s in stages}
    order = with_default_order([s.name for s in stages if s.configured])
    placed = [by_name[name] for name in order if name in by_name]
    return placed + [s for s in stages if s.name not in order]


def _stage(run: RunDir, entry: StageEntry, derived: RunOnDisk) -> StageView:
    folder = run.stage_dir(entry.folder)
    attempts = len(list((folder / "attempts").glob("*"))) if (folder / "attempts").is_dir() else 0
    path = folder / "stage.json"
    if not path.is_file():
        return StageView(
            entry.name,
            entry.folder,
            StageState.NOT_RUN.value,
            "not run yet",
            True,
            earlier_attempts=attempts,
        )
    name = entry.name
    found, why = derived.stages[name].value, derived.reasons[name]
    try:
        stage = StageRecord.load(path)
    except RunStoreError:
        return StageView(name, entry.folder, found, why, True)
    if stage.status == "running" and derived.status == "running":
        outcome, reason = "RUNNING", "running now"
    else:
        outcome, reason = found, why
    checks = [_check(folder, entry) for entry in stage.checks]
    ran = stage.ran_under
    return StageView(
        name=entry.name,
        folder=entry.folder,
        outcome=outcome,
        reason=reason,
        configured=True,
        ungated=stage.ungated,
        attempt=stage.attempt,
        earlier_attempts=attempts,
        duration_s=stage.duration_s,
        checks=checks,
        plan_digest=ran.plan_digest if ran else None,
        revision=ran.revision if ran else None,
        dirty=ran.dirty if ran else None,
        plan_changes=list(ran.plan_changes) if ran and ran.plan_changes is not None else None,
    )


def _check(folder: Path, entry: CheckEntry) -> CheckView:
    """A check of a stage, as its stage.json lists it, with the evidence its result.json holds
    (a result that does not read is an ERROR whose reason and finding name the file and the key:
    what stage.json says of it cannot be checked against it)."""
    path = folder / entry.name / "result.json"
    try:
        result = CheckResult.load(path) if path.is_file() else None
    except RunStoreError as exc:
        unreadable = [SavedFinding(verdict="ERROR", message=exc.message, role=None)]
        return CheckView(entry.name, entry.kind, "ERROR", exc.message, "", False, None, unreadable, [])
    if result is None:
        return CheckView(entry.name, entry.kind, entry.verdict, entry.reason, "", False, None, [], [])
    return CheckView(
        name=entry.name,
        kind=entry.kind,
        verdict=entry.verdict,
        reason=entry.reason,
        verdict_rules=result.verdict_rules,
        ungated=result.ungated,
        duration_s=result.duration_s,
        findings=list(result.findings),
        tables=list(result.tables),
        charts=list(result.charts),
        limits_of_evidence=result.limits_of_evidence,
        rejudged_at=result.rejudged_at,
        judged=list(result.judged),
        shared=shared_measurement(result.evidence),
        cause=cause_line(result.evidence),
    )


def _plan_notes(model: ReportModel) -> list[str]:
    """The stages whose plan is not known to be the one the run was made with: rerun under a
    changed plan (`--allow-dirty`), or rerun in a run that recorded no plan to compare with."""
    made = f"git {model.source.rev[:12]}" if model.source.rev else "the run"
    notes = []
    for stage in model.stages:
        if stage.changed_plan:
            notes.append(
                f"Stage {stage.name} ran under a plan that differs from the one the run was made with "
                f"({', '.join(stage.plan_changes or ())}): {headline.ran_under(stage)}, not the plan of "
                f"{made}. Its result is not one of the run's recorded revision."
            )
        elif stage.plan_digest is not None and stage.plan_changes is None:
            notes.append(
                f"Stage {stage.name} ran under {headline.ran_under(stage)}, and the run, made by an "
                "older qualify, recorded no plan to compare it with: whether it is the plan of "
                f"{made} is not known."
            )
    return notes


def _with_limits_of_evidence(model: ReportModel) -> ReportModel:
    """'What this does not prove', written from what the run knows about itself."""
    notes: list[str] = []
    for stage in model.stages:
        if stage.outcome == StageState.NOT_CONFIGURED.value:
            where = (
                "was left out of this run" if stage.reason == LEFT_OUT else "is not configured in this plan"
            )
            notes.append(f"Stage {stage.name} {where}: nothing about it was measured.")
        elif stage.outcome == StageState.NOT_APPLICABLE.value:
            notes.append(
                f"Stage {stage.name} does not apply to this engine, as the plan declares ({stage.reason}): "
                "nothing about it was measured."
            )
        elif stage.outcome in (
            StageState.BLOCKED.value,
            StageState.NOT_RUN.value,
            StageState.INTERRUPTED.value,
        ):
            notes.append(f"Stage {stage.name} did not run ({stage.outcome.lower()}: {stage.reason}).")
        elif stage.outcome == StageState.STALE.value:
            notes.append(f"Stage {stage.name} is stale: it {stage.reason}; rerun it (--only) to count it.")
        elif stage.outcome == "SKIPPED":
            notes.append(f"Stage {stage.name} was skipped here: {stage.reason}.")
        for check in stage.checks:
            notes += [f"{stage.name}/{check.name}: {note}" for note in check.limits_of_evidence]
            if check.verdict == "INCONCLUSIVE":
                notes.append(
                    f"{stage.name}/{check.name} was inconclusive: the data could not "
                    "decide at the stated limits."
                )
    ungated = [s.name for s in model.stages if s.ungated]
    if ungated:
        notes.insert(
            0,
            f"{'Stages' if len(ungated) > 1 else 'Stage'} {', '.join(ungated)} ran past a failed gate "
            "(--no-gate): their results are ungated and do not count toward qualification.",
        )
    notes += _plan_notes(model)
    if model.source.dirty:
        changed = ", ".join(model.source.changed)
        notes.append(
            "The source tree had uncommitted changes to tracked files"
            + (f" ({changed})" if changed else "")
            + ": the revision does not fully describe what was measured."
        )
    untracked = model.source.untracked
    if untracked:
        count = model.source.untracked_count
        more = count - len(untracked) if count is not None and count > len(untracked) else 0
        notes.append(
            f"The tree held untracked files ({', '.join(untracked)}{f' and {more} more' if more else ''}): "
            "nix builds a flake from its tracked files only, so none of them is in the arms."
        )
    if model.source.rev is None:
        notes.append(
            "The project is not a git checkout: no git revision was recorded (the header names "
            "what the build locked instead, where it knows it)."
        )
    if model.gpu_processes:
        notes.append(
            f"{len(model.gpu_processes)} other process(es) held a GPU device when the "
            "run started; measurements may be disturbed."
        )
    pinned, candidate = model.role("pinned"), model.role("candidate")
    if pinned and candidate and pinned.arm == candidate.arm:
        notes.append(
            "This is an A/A run (the candidate is the pinned arm): it measures the "
            "harness's noise floor, not a toolchain change."
        )
    if not model.gpus:
        notes.append("No GPU was visible on this machine: nothing here exercised GPU code.")
    if model.rejudged:
        last = model.rejudged[-1]
        notes.append(
            f"Verdicts were re-decided on {last.at} with the limits of {last.plan}, "
            "from the data measured before; nothing was measured again."
        )
    return replace(model, not_proven=notes)
