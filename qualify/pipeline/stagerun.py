"""Running one stage: each check measured, judged and saved; the stage verdict written."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.checks.base import CheckKind, Judgement, Measure, SavedCheck
from qualify.checks.registry import kind_named
from qualify.core.checkspec import CheckSpec
from qualify.core.config import ProjectConfig
from qualify.core.containment import reached_records, writing
from qualify.core.context import CheckContext, PlannedCheck, RoleArm
from qualify.core.environment import redact_env
from qualify.core.errors import QualifyError, RunStoreError
from qualify.core.redaction import redact_known
from qualify.core.runstore import RunDir, now_iso
from qualify.core.verdicts import StageState, Verdict, stage_verdict
from qualify.pipeline.events import Events
from qualify.pipeline.judging import crashed, harness_error_log, judge_saved
from qualify.pipeline.ondisk import RESULT, STAGE, stage_on_disk
from qualify.pipeline.plan import StageSpec
from qualify.pipeline.planfiles import PlanStamp
from qualify.pipeline.sofar import stages_before
from qualify.records import seal
from qualify.records.result import CheckResult
from qualify.records.run import RunRecord, update_run
from qualify.records.stage import CheckEntry, StageRecord

__all__ = ["RESULT", "STAGE", "StageRunner", "inputs_hash", "mark_stale", "stage_outcome"]

#: A running stage's stage.json lists the checks finished so far, saved again after a check at
#: most once a second, and no oftener than every PROGRESS_SHARE times what its last save took
#: (so saving takes at most a twentieth of the stage's time). It holds the stage's whole plan:
#: saved after every check, a stage's time grew with the square of its checks. What a resume
#: keeps does not wait on it: each check's result.json and files are sealed as the check ends.
#: Every sealed file is compared with the seal then too, and after each check whose commands
#: could have written one (`containment.reached_records`).
PROGRESS_S = 1.0
PROGRESS_SHARE = 20


def inputs_hash(
    spec: Any,
    arms: Mapping[str, RoleArm],
    config: ProjectConfig,
    *,
    source: Mapping[str, Any] | None = None,
) -> str:
    """What a stage's or check's result depends on: the arms' builds and the resolved config.

    A stage that builds the arms passes `source` (revision, lock hash, build options) instead:
    its inputs are what it builds from, not the store paths it produces.
    """
    document = {
        "spec": spec,
        "source": source,
        "arms": {
            role: {
                "arm": bound.arm.name,
                "installable": bound.arm.installable,
                "nix_args": list(bound.arm.nix_args),
                "out": None if source is not None else bound.out,
                "drv": None if source is not None else bound.drv,
                "env": redact_env(bound.arm.env),
                "vars": {
                    k: list(v) if isinstance(v, tuple) else v for k, v in config.vars_for(bound.arm).items()
                },
            }
            for role, bound in sorted(arms.items())
        },
    }
    text = json.dumps(document, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def stage_outcome(run: RunDir, stage: StageSpec) -> Verdict | StageState:
    """A stage's outcome from its files (`ondisk.stage_on_disk`): its verdict only when its
    stage.json and every result.json under it read and agree, else BLOCKED, INTERRUPTED,
    STALE, UNREADABLE or NOT RUN."""
    return stage_on_disk(run.path, stage.as_json()).outcome


def saved_verdict(run: RunDir, stage: StageSpec) -> Verdict | StageState:
    """The outcome of `stage_outcome`, with a stale stage's own saved verdict (for gating)."""
    found = stage_on_disk(run.path, stage.as_json())
    if found.outcome is StageState.STALE and found.saved is not None:
        return found.saved
    return found.outcome


def mark_stale(run: RunDir, folder: str, inputs_hash: str) -> bool:
    """Flag a kept stage whose saved inputs hash differs from `inputs_hash` (or unflag it when
    the inputs are back as they were); True when it is stale."""
    saved = StageRecord.load(run.stage_dir(folder) / STAGE)
    stale = saved.inputs_hash != inputs_hash
    if stale and not saved.stale:
        saved.updated(stale={"since": now_iso(), "inputs_hash_now": inputs_hash}).save()
    elif not stale and saved.stale is not None:
        saved.updated(drop=("stale",)).save()
    return stale


@dataclass
class StageRunner:
    """Runs the checks of one stage into `<run>/<NN-stage>/`."""

    run: RunDir
    config: ProjectConfig
    arms: Mapping[str, RoleArm]
    events: Events  # what the console hears
    profile: str | None
    options: Mapping[str, Any]
    source: Mapping[str, Any]  # revision, lock hash and build options, for build checks
    #: The plan and the revision this attempt runs under, recorded with each stage it runs.
    stamp: PlanStamp | None = None
    #: Every check of the run's plan, for a check that reads a later stage's (`CheckContext.plan`).
    plan: tuple[PlannedCheck, ...] = ()

    def _ran_under(self) -> dict[str, Any]:
        return {"ran_under": self.stamp.as_json()} if self.stamp is not None else {}

    def roles_for(self, check: CheckSpec, kind: CheckKind) -> dict[str, RoleArm]:
        if kind.builds_arms:
            return dict(self.arms)
        return {role: self.arms[role] for role in check.roles}

    def blocked(self, stage: StageSpec, blocked_by: str, why: str) -> None:
        folder = self.run.stage_dir(stage.folder)
        seal.moved_aside(folder, self.run.move_to_attempts(stage.folder))
        StageRecord.parse(
            folder / STAGE,
            {
                "name": stage.name,
                "folder": stage.folder,
                "status": "complete",
                "verdict": StageState.BLOCKED.value,
                "blocked_by": blocked_by,
                "reason": f"blocked by stage {blocked_by} ({why}); --no-gate runs it anyway",
                "checks": [],
                "finished_at": now_iso(),
            },
        ).save()

    def skipped(self, stage: StageSpec, why: str, *, stage_hash: str) -> None:
        """Record `stage` as SKIPPED on this host: each check's result says why (so the stage's
        records agree, as every kept stage's must), nothing is measured."""
        folder = self.run.stage_dir(stage.folder)
        seal.moved_aside(folder, self.run.move_to_attempts(stage.folder))
        attempt = len(list((folder / "attempts").glob("*"))) + 1 if folder.exists() else 1
        entries = []
        for spec in stage.checks:
            CheckResult.parse(
                folder / spec.name / RESULT,
                {
                    "stage": stage.name,
                    "check": spec.name,
                    "kind": spec.kind,
                    "spec": spec.as_json(),
                    "started_at": now_iso(),
                    "duration_s": 0.0,
                    "crashed": None,
                    **Judgement(Verdict.SKIPPED, why).as_json(),
                },
            ).save()
            entries.append(
                CheckEntry(
                    name=spec.name, kind=spec.kind, verdict=Verdict.SKIPPED.value, reason=why
                ).to_json()
            )
        StageRecord.parse(
            folder / STAGE,
            {
                "name": stage.name,
                "folder": stage.folder,
                "status": "complete",
                "attempt": attempt,
                "profile": self.profile,
                "inputs_hash": stage_hash,
                "inconclusive": stage.inconclusive,
                "spec": stage.as_json(),
                **self._ran_under(),
                "verdict": Verdict.SKIPPED.value,
                "reason": why,
                "checks": entries,
                "finished_at": now_iso(),
            },
        ).save()

    def execute(
        self,
        stage: StageSpec,
        *,
        stage_hash: str,
        ungated: bool,
        gate_note: str | None,
        measured: Mapping[str, Measure] | None = None,
    ) -> Verdict:
        folder = self.run.stage_dir(stage.folder)
        previous = self.run.move_to_attempts(stage.folder)
        seal.moved_aside(folder, previous)
        attempt = len(list((folder / "attempts").glob("*"))) + 1 if folder.exists() else 1
        record = StageRecord.parse(
            folder / STAGE,
            {
                "name": stage.name,
                "folder": stage.folder,
                "status": "running",
                "attempt": attempt,
                "profile": self.profile,
                "inputs_hash": stage_hash,
                "inconclusive": stage.inconclusive,
                "ungated": ungated,
                "ungated_past": gate_note,
                "spec": stage.as_json(),
                # The configuration this attempt ran with: a later rerun may change it.
                "config": self.config.snapshot(),
                **self._ran_under(),
                "started_at": now_iso(),
                "checks": [],
            },
        )
        record.save()
        start = saved_at = time.monotonic()
        save_s = 0.0
        entries: list[CheckEntry] = []
        try:
            for spec in stage.checks:
                # The check's records, and its stage.json when due, are sealed at once.
                with seal.deferred():
                    judgement = self._check(
                        stage, spec, folder, previous, ungated, (measured or {}).get(spec.name)
                    )
                    entries.append(
                        CheckEntry(
                            name=spec.name,
                            kind=spec.kind,
                            verdict=judgement.verdict.value,
                            reason=judgement.reason,
                        )
                    )
                    now = time.monotonic()
                    if now - saved_at >= max(PROGRESS_S, PROGRESS_SHARE * save_s):
                        seal.check()  # as a check whose commands could write the records does
                        record = record.with_checks(entries)
                        record.save()
                        saved_at = time.monotonic()
                        save_s = saved_at - now
            seal.check()  # before the stage's verdict is saved, and run.json read to be written
        except BaseException:
            record.with_checks(
                entries,
                status="interrupted",
                finished_at=now_iso(),
                duration_s=round(time.monotonic() - start, 3),
            ).save()
            raise
        verdicts = [Verdict(c.verdict) for c in entries]
        verdict = stage_verdict(verdicts, inconclusive_as_warn=stage.inconclusive_as_warn)
        record.with_checks(
            entries,
            status="complete",
            verdict=verdict.value,
            reason=stage_reason(entries, verdict),
            finished_at=now_iso(),
            duration_s=round(time.monotonic() - start, 3),
        ).save()
        return verdict

    def _check(
        self,
        stage: StageSpec,
        spec: CheckSpec,
        folder: Path,
        previous: Path | None,
        ungated: bool,
        measured: Measure | None = None,
    ) -> Judgement:
        check_dir = folder / spec.name
        kind = kind_named(spec.kind, str(stage.file))
        arms = self.roles_for(spec, kind)
        source = self.source if kind.builds_arms else None
        check_hash = inputs_hash(spec.as_json(), arms, self.config, source=source)
        reused = _reusable(previous, spec.name, check_hash, self.run.path)
        if reused is not None:
            # Copied as it is, links as links, into a stage folder that is no link itself.
            self.run.folder(stage.folder)
            shutil.copytree(reused, check_dir, symlinks=True)
            seal.note_folder(check_dir)  # sealed where it was; the kept copy is sealed too
            kept = CheckResult.load(check_dir / RESULT)
            judgement = Judgement(Verdict(kept.verdict), kept.reason)
            self.events.echo(f"{spec.name}: kept from the interrupted attempt (inputs unchanged)")
            self.events.check_end(stage.name, spec.name, judgement)
            return judgement
        self.run.folder(stage.folder, spec.name)
        roles = tuple(arms)
        events = self.events
        ctx = CheckContext(
            spec=spec,
            folder=check_dir,
            run_dir=self.run.path,
            config=self.config,
            arms=arms,
            echo=events.echo,
            options=self.options,
            roles_override=roles,
            progress=events.progress,
            advance=events.advance,
            earlier=lambda: stages_before(self.run, stage.name),
            plan=self.plan,
        )
        events.check_start(stage.name, spec.name)
        started = now_iso()
        t0 = time.monotonic()
        crash: str | None = None
        try:
            # The check's commands may write its own folder (and nix its GC roots), nothing
            # else of the runs directory.
            seal.measuring(check_dir)
            with writing(check_dir, gcroots=self.run.path / "gcroots"):
                if measured is not None:
                    measured(ctx)  # measured with other runs (a run set's bench): this fills its folder
                else:
                    kind.measure(ctx)
        except QualifyError as exc:
            # Its message may quote the command's output (a server's log tail, in the hint).
            crash = redact_known(str(exc)).replace("\n", " — ")
        except Exception as exc:  # a harness bug must not lose the run: record it as ERROR
            log = harness_error_log(check_dir)
            crash = f"internal error in check kind {spec.kind!r}: {exc!r}; see {log}"
        finally:
            events.progress(None)
            _record_arms(self.run, ctx.learned)
        if reached_records():
            # The check's commands have ended: had one changed a record, stop here. Commands that
            # could not (read-only run folder, another user, a cgroup) are compared for below.
            seal.check()
        seal.note_folder(check_dir)  # what the judge reads is what the commands left, sealed now
        # A crashed measurement is ERROR on what it left; judging its partial data could pass it.
        judgement = (
            crashed(crash) if crash is not None else judge_saved(kind, SavedCheck(check_dir, spec, roles))
        )
        CheckResult.parse(
            check_dir / RESULT,
            {
                "stage": stage.name,
                "check": spec.name,
                "kind": spec.kind,
                "verdict_rules": kind.verdict_rules,
                "roles": {role: {"arm": a.arm.name, "out": a.out} for role, a in arms.items()},
                "spec": spec.as_json(),
                "inputs_hash": check_hash,
                "ungated": ungated,
                "started_at": started,
                "duration_s": round(time.monotonic() - t0, 3),
                "crashed": crash,
                **judgement.as_json(),
            },
        ).save()
        seal.note_folder(check_dir)  # and what the judge wrote beside its result
        events.check_end(stage.name, spec.name, judgement)
        return judgement


def _record_arms(run: RunDir, learned: Mapping[str, Mapping[str, str | None]]) -> None:
    """Write what a build check learned about the roles' arms into run.json (only the stage
    runner writes run.json; a check says what it learned through its context)."""
    if not learned:
        return
    roles = dict(RunRecord.load(run).document["roles"])
    for role, facts in learned.items():
        roles[role] = {**roles[role], **facts}
    update_run(run, roles=roles)


def _reusable(previous: Path | None, name: str, check_hash: str, run_path: Path) -> Path | None:
    """A finished check of an interrupted attempt whose inputs are unchanged, if any."""
    if previous is None or not (previous / STAGE).is_file():
        return None
    try:
        if StageRecord.load(previous / STAGE).complete:
            return None  # a finished stage is rerun on purpose: never reuse its checks
        result = previous / name / RESULT
        problem, _ = seal.stage_problem(previous / name, [result], run_path)
        if problem is not None:
            return None  # changed since qualify sealed it: measured again, never kept
        if result.is_file() and CheckResult.load(result).inputs_hash == check_hash:
            return previous / name
    except RunStoreError:
        return None  # an unreadable record is never reused
    return None


def stage_reason(checks: Sequence[CheckEntry], verdict: Verdict) -> str:
    if verdict in (Verdict.PASS, Verdict.SKIPPED) and checks:
        return f"{len(checks)} check(s): " + ", ".join(f"{c.name} {c.verdict}" for c in checks)
    worst = [c for c in checks if c.verdict == verdict.value] or [
        c for c in checks if c.verdict == Verdict.INCONCLUSIVE.value
    ]
    if not worst:
        return ""
    first = worst[0]
    return f"{first.name}: {first.reason}"
