"""A verdict derived from what is on disk, never read back and trusted.

run.json keeps a `verdict` and an `exit_code` for whoever reads the file by hand, but nothing in
qualify believes them: a rerun that was stopped, a stage.json cut short, a result.json edited
by hand or a folder copied from another host would otherwise keep saying what an earlier
attempt decided. Every reader that shows, renders, merges or exits with a verdict calls here:

- a stage counts only when its stage.json and the result.json of every check it lists read,
  name the same checks as the plan's stage, agree verdict for verdict, and combine into the
  stage verdict saved (`stage_on_disk`);
- a run's verdict is the rule of the verdicts section over those stages, and a run whose last
  attempt did not finish (running, interrupted, failed, killed) is never QUALIFIED
  (`run_on_disk`);
- a set's verdict is its members' derived verdicts and their controls' behaviour, and a set
  that did not finish (or whose members' folders are not all there) is never QUALIFIED
  (`set_on_disk`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.checks.refusals import checked
from qualify.core.errors import ExitCode, RunStoreError
from qualify.core.runstore import RunDir
from qualify.core.verdicts import (
    LEFT_OUT,
    RunVerdict,
    StageState,
    Verdict,
    exit_code_for,
    run_verdict,
    stage_verdict,
)
from qualify.pipeline.members import Behaviour, behaviour, set_verdict
from qualify.pipeline.notapplicable import NOT_MEASURING
from qualify.pipeline.plan import DEFAULT_ORDER
from qualify.records import seal
from qualify.records.plan import SavedStage
from qualify.records.result import CheckResult
from qualify.records.run import Member, RunRecord
from qualify.records.stage import StageRecord

RESULT = "result.json"
STAGE = "stage.json"

Outcome = Verdict | StageState


@dataclass(frozen=True)
class StageOnDisk:
    """One stage as its files say now."""

    name: str
    folder: str
    outcome: Outcome
    reason: str
    #: The verdict stage.json saved, when it read (a stale stage still gates by it).
    saved: Verdict | None = None
    #: A check of it was INCONCLUSIVE and the plan counted that as WARN: it decided nothing.
    undecided: bool = False


@dataclass(frozen=True)
class RunOnDisk:
    """A run (or a set's member) as its files say now."""

    verdict: RunVerdict
    exit_code: ExitCode
    status: str
    stages: dict[str, Outcome]
    reasons: dict[str, str]
    #: Why the run is not QUALIFIED although its stages would make it so (it did not finish).
    unfinished: str | None = None
    #: Stages that passed only because the plan counts INCONCLUSIVE as WARN.
    undecided: tuple[str, ...] = ()
    #: The stages of the plan the run records, in order (the others are NOT CONFIGURED).
    planned: tuple[str, ...] = ()
    #: How the run's seal reads here ("sealed and verified", "not sealed: …", "seal not
    #: verifiable here: …"; `qualify.records.sealdoc`).
    seal: str = ""

    def open_stages(self, *, own_plan_only: bool = False) -> list[str]:
        """The stages that keep the run from a decision, as a verdict line names them
        ("serving not configured", "bench not run"); a plan whose stages all passed but
        measured nothing beyond the build says so. `own_plan_only`: the stages the run's own
        plan holds (a negative control's plan leaves the others out on purpose: the set's plan
        configures them, so they are not "not configured")."""
        decided = (Verdict.PASS, Verdict.WARN, Verdict.FAIL, Verdict.INCONCLUSIVE, StageState.NOT_APPLICABLE)
        found = [
            f"{n} left out" if self.reasons.get(n) == LEFT_OUT else f"{n} {o.value.lower()}"
            for n, o in self.stages.items()
            if o not in decided and (n in self.planned or not own_plan_only)
        ]
        measured_nothing = not found and self.verdict is RunVerdict.INCOMPLETE and self.unfinished is None
        if measured_nothing and not own_plan_only:
            found.append("no stage but the build measured the engine")
        if self.unfinished is not None:
            found.append(self.unfinished)
        return found


@dataclass(frozen=True)
class MemberOnDisk:
    member: Member
    run: RunOnDisk | None  # None: its folder was never written (the set stopped while being made)
    behaviour: Behaviour


@dataclass(frozen=True)
class SetOnDisk:
    verdict: RunVerdict
    exit_code: ExitCode
    status: str
    reason: str
    members: list[MemberOnDisk]
    controls_behaved: bool | None


def stage_on_disk(run_path: Path, spec: Mapping[str, Any]) -> StageOnDisk:
    """The outcome of the stage `spec` (a stage of the run's saved plan, as saved) from its files."""
    planned = checked(SavedStage, spec, run_path / "run.json")
    name, folder = planned.name, planned.folder
    path = run_path / folder / STAGE
    if not path.is_file():
        return StageOnDisk(name, folder, StageState.NOT_RUN, "not run yet")
    try:
        record = StageRecord.load(path)
    except RunStoreError as exc:
        return StageOnDisk(name, folder, StageState.UNREADABLE, exc.message)
    if not record.complete:
        return StageOnDisk(name, folder, StageState.INTERRUPTED, "interrupted before it finished")
    if record.verdict == StageState.BLOCKED.value:
        return StageOnDisk(name, folder, StageState.BLOCKED, record.reason)
    try:
        saved = Verdict(str(record.verdict))
    except ValueError:
        return StageOnDisk(name, folder, StageState.UNREADABLE, f"{path}: no stage verdict saved")
    sealed, _ = seal.stage_problem(
        path.parent, [path, *(path.parent / e.name / RESULT for e in record.checks)], run_path
    )
    if sealed is not None:
        return StageOnDisk(name, folder, StageState.UNREADABLE, sealed, saved)
    trouble = _disagreement(record, planned, saved)
    if trouble is not None:
        return StageOnDisk(name, folder, StageState.UNREADABLE, trouble, saved)
    if record.stale or _canonical(record.spec) != _canonical(dict(spec)):
        why = f"was {saved.value}, but its inputs changed since it ran; rerun it to qualify"
        return StageOnDisk(name, folder, StageState.STALE, why, saved)
    undecided = record.inconclusive == "warn" and any(
        e.verdict == Verdict.INCONCLUSIVE.value for e in record.checks
    )
    return StageOnDisk(name, folder, saved, record.reason, saved, undecided)


def _disagreement(record: StageRecord, stage: SavedStage, saved: Verdict) -> str | None:
    """Why stage.json and its checks' result.json do not make one consistent stage, or None."""
    listed = [e.name for e in record.checks]
    planned = [c.name for c in stage.checks]
    if listed != planned:
        return f"{record.path}: it lists checks {listed}, the plan's stage has {planned}"
    verdicts = []
    for entry in record.checks:
        try:
            result = CheckResult.load(record.path.parent / entry.name / RESULT)
        except RunStoreError as exc:
            return exc.message
        if result.check != entry.name:
            return f"{result.path}: it is the result of check {result.check!r}, not {entry.name!r}"
        if result.verdict != entry.verdict:
            return f"{result.path}: verdict {result.verdict!r} where {record.path} says {entry.verdict!r}"
        try:
            verdicts.append(Verdict(result.verdict))
        except ValueError:
            return f"{result.path}: {result.verdict!r} is not a verdict"
    combined = stage_verdict(verdicts, inconclusive_as_warn=record.inconclusive == "warn")
    if combined is not saved:
        return f"{record.path}: saved verdict {saved.value}, its checks combine to {combined.value}"
    return None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def stages_on_disk(run: RunDir, saved: Mapping[str, Any] | None = None) -> list[StageOnDisk]:
    """Every stage of the run's saved plan, from its files."""
    record = RunRecord.parse(run, run.read() if saved is None else saved)
    return [stage_on_disk(run.path, entry.spec) for entry in record.stages]


def run_on_disk(
    run: RunDir, saved: RunRecord | None = None, *, seal_required: bool | None = None
) -> RunOnDisk:
    """The run's verdict and exit code from its stages as they are now (`saved`: its record,
    when the caller has read it). A run whose seal does not verify here, or whose run.json is not
    as sealed, is never QUALIFIED; `seal_required=False` (a fleet merge, of hosts whose keys it
    does not hold) takes a seal of another host as it reads, and says so. By default a run is
    read as a fleet's host where it is one (in a fleet's `hosts/`), else with its seal required."""
    record = RunRecord.parse(run, run.read()) if saved is None else saved
    stages = [stage_on_disk(run.path, entry.spec) for entry in record.stages]
    outcomes: dict[str, Outcome] = {s.name: s.outcome for s in stages}
    reasons = {s.name: s.reason for s in stages}
    for name, why in record.not_applicable.items():
        if name not in outcomes:
            outcomes[name], reasons[name] = StageState.NOT_APPLICABLE, why
    # The plan's stages this run was narrowed away from (`--stage`): not configured here, so a
    # narrowed run never qualifies, whether the default order holds them or not.
    for name in record.options.left_out:
        if name not in outcomes:
            outcomes[name], reasons[name] = StageState.NOT_CONFIGURED, LEFT_OUT
    for name in DEFAULT_ORDER:
        if name not in outcomes:
            outcomes[name] = StageState.NOT_CONFIGURED
            reasons[name] = "the plan has no such stage"
    verdict = run_verdict(outcomes, DEFAULT_ORDER, not_measuring=NOT_MEASURING)
    status = status_of(run, record)
    unfinished = None
    if status != "complete" and verdict is RunVerdict.QUALIFIED:
        # Every stage on disk passed, but the last attempt did not end: what it was doing (a
        # rerun, a new plan) is not in those stages, so they cannot speak for it.
        unfinished = f"its last attempt is {status}, not complete"
        verdict = RunVerdict.INCOMPLETE
    problem, state = seal.run_problem(run.path)
    if problem is None and state.trust is not seal.Trust.VERIFIED and _required(run, seal_required):
        problem = state.words
    if problem is not None and verdict is RunVerdict.QUALIFIED:
        # Its stages say QUALIFIED, but who wrote them cannot be told here.
        unfinished, verdict = problem, RunVerdict.INCOMPLETE
    undecided = tuple(s.name for s in stages if s.undecided)
    planned = tuple(s.name for s in stages)
    return RunOnDisk(
        verdict,
        exit_code_for(verdict),
        status,
        outcomes,
        reasons,
        unfinished,
        undecided,
        planned,
        state.words,
    )


def _required(run: RunDir, given: bool | None) -> bool:
    """Whether the run's seal must verify here for it to qualify: yes, but for a fleet's host (a
    run, or a set's member, in `hosts/<key>/`), whose key this host does not hold."""
    if given is not None:
        return given
    return "hosts" not in (run.path.parent.name, run.path.parent.parent.name)


def _open_members(found: list[MemberOnDisk]) -> str:
    """What keeps an INCOMPLETE set from a decision, member by member, naming the stages:
    "not decided: clang19 (serving not configured, soak not configured)"."""
    parts = []
    for f in found:
        if f.member.is_control and f.behaviour.behaved is True:
            continue
        if f.run is None:
            parts.append(f"{f.member.label} ({f.behaviour.why or 'its folder was never written'})")
        elif f.member.is_control or f.run.verdict is not RunVerdict.QUALIFIED or f.run.status != "complete":
            stages = f.run.open_stages(own_plan_only=f.member.role == "negative")
            what = ", ".join(stages) if stages else (f.behaviour.why or f.run.unfinished or f.run.status)
            parts.append(f"{f.member.label} ({what})")
    return "not decided: " + "; ".join(parts) if parts else ""


def status_of(run: RunDir, record: RunRecord) -> str:
    """The saved status, with one saved as running but held by no process called dead."""
    if record.status == "running" and not run.writer_alive():
        return "dead"
    return record.status


def set_on_disk(
    run: RunDir, saved: RunRecord | None = None, *, seal_required: bool | None = None
) -> SetOnDisk:
    """A set's verdict from its members' folders as they are now (`saved`: its record, when the
    caller has read it; `seal_required` as for `run_on_disk`)."""
    saved_set = RunRecord.parse(run, run.read()) if saved is None else saved
    members = list(saved_set.members)
    found: list[MemberOnDisk] = []
    verdicts: dict[str, RunVerdict | None] = {}
    behaviours: dict[str, Behaviour] = {}
    for m in members:
        member = RunDir(run.path / m.label)
        try:
            mine = member.read()
        except RunStoreError as exc:
            missing = Behaviour(None, f"{m.label}: {exc.message}")
            found.append(MemberOnDisk(m, None, missing))
            verdicts[m.label], behaviours[m.label] = None, missing
            continue
        derived = run_on_disk(member, RunRecord.parse(member, mine), seal_required=seal_required)
        outcomes = {name: derived.stages[name] for name in derived.planned}
        behaved = behaviour(m, outcomes, derived.undecided)
        # A member that did not finish has not decided anything yet, whatever its stages say.
        verdicts[m.label] = derived.verdict if derived.status == "complete" else None
        if derived.status != "complete" and behaved.behaved is True:
            behaved = Behaviour(None, f"{behaved.why}, but its last attempt is {derived.status}")
        behaviours[m.label] = behaved
        found.append(MemberOnDisk(m, derived, behaved))
    if members:
        verdict, why = set_verdict(verdicts, behaviours, members)
        if verdict is RunVerdict.INCOMPLETE:
            why = _open_members(found) or why
        open_ = [(f, name) for f in found if f.run for name in f.run.undecided]
        if verdict is RunVerdict.QUALIFIED and open_:
            # The verdict never says more than was decided, nor how it was counted: each stage's
            # undecided checks, from its stage.json, and its `inconclusive` from the saved plan.
            said = []
            for f, name in open_:
                folder = run.path / f.member.label
                entry = next(e for e in RunRecord.load(RunDir(folder)).stages if e.name == name)
                stage = StageRecord.load(folder / entry.folder / STAGE)
                checks = ", ".join(c.name for c in stage.checks if c.verdict == Verdict.INCONCLUSIVE.value)
                setting = entry.inconclusive
                how = "as the plan says" if setting == "warn" else "by its stage.json where the plan says"
                counted = f'counted as WARN {how}: inconclusive = "{setting}"'
                said.append(f"{f.member.label} {name} ({checks} INCONCLUSIVE, {counted})")
            why = f"{why}, but a check decided nothing at these stages: {'; '.join(said)}"
    else:
        verdict, why = RunVerdict.INCOMPLETE, "the set has no members on record"
    statuses = [status_of(run, saved_set)] + [f.run.status if f.run else "not created" for f in found]
    status = next(
        (s for s in ("running", "failed", "interrupted", "dead", "not created") if s in statuses),
        "complete" if all(s == "complete" for s in statuses) else statuses[0],
    )
    if status != "complete" and verdict is RunVerdict.QUALIFIED:
        verdict, why = RunVerdict.INCOMPLETE, f"{why}, but the set's last attempt is {status}"
    problem, state = seal.run_problem(run.path)
    if problem is None and state.trust is not seal.Trust.VERIFIED and _required(run, seal_required):
        problem = state.words
    if problem is not None and verdict is RunVerdict.QUALIFIED:
        verdict, why = RunVerdict.INCOMPLETE, f"{why}, but {problem}"
    controls = [f for f in found if f.member.is_control]
    behaved_all: bool | None = None
    if controls:
        states = [f.behaviour.behaved for f in controls]
        behaved_all = False if False in states else (True if all(states) else None)
    return SetOnDisk(verdict, exit_code_for(verdict), status, why, found, behaved_all)


def verdict_on_disk(run: RunDir) -> tuple[RunVerdict, ExitCode, str]:
    """The verdict, exit code and status of a run or a set, derived (run.json must read)."""
    saved = RunRecord.parse(run, run.read())
    if saved.is_set:
        derived_set = set_on_disk(run, saved)
        return derived_set.verdict, derived_set.exit_code, derived_set.status
    derived = run_on_disk(run, saved)
    return derived.verdict, derived.exit_code, derived.status
