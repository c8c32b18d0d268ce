"""A run's stages taken one at a time: kept, blocked by an earlier gate, or run."""

from __future__ import annotations

import time
from collections.abc import Mapping

from qualify.checks.base import Measure
from qualify.checks.registry import kind_named
from qualify.core import process
from qualify.core.config import ProjectConfig
from qualify.core.context import PlannedCheck, RoleArm
from qualify.core.placeholders import expand
from qualify.core.runstore import RunDir
from qualify.core.verdicts import GATE_BLOCKING, StageState, Verdict
from qualify.pipeline.events import Events
from qualify.pipeline.plan import Plan, StageSpec
from qualify.pipeline.planfiles import PlanStamp
from qualify.pipeline.request import RunRequest
from qualify.pipeline.rundoc import with_build_facts
from qualify.pipeline.stagerun import (
    STAGE,
    StageRunner,
    inputs_hash,
    mark_stale,
    saved_verdict,
    stage_outcome,
)
from qualify.records.run import RunRecord, update_run
from qualify.records.stage import StageRecord


class StageLoop:
    """One run's stages, taken one at a time: kept, blocked by an earlier gate, or run.

    A run set steps its members' loops stage by stage, so a candidate failing a gate stops its
    own later stages while the others go on.
    """

    def __init__(
        self,
        run: RunDir,
        config: ProjectConfig,
        arms: dict[str, RoleArm],
        selected: set[str] | None,
        request: RunRequest,
        events: Events,
        stamp: PlanStamp | None = None,
        plan: Plan | None = None,
        lookups: Plan | None = None,
    ) -> None:
        saved = RunRecord.load(run)
        options = saved.options.as_json()
        provenance_ = saved.provenance
        # The source's part of a build stage's inputs, as recorded (its hash is of these values).
        self.source = {
            "git": provenance_.git.as_json() if "git" in provenance_.model_fields_set else None,
            "flake_lock": provenance_.flake_lock.sha256 if provenance_.flake_lock else None,
            "options": options,
        }
        self.run, self.config, self.selected, self.request, self.events = (
            run,
            config,
            selected,
            request,
            events,
        )
        # run.json keeps a secret nix option, and a token in an override's URL, redacted: the
        # build gets this invocation's own.
        given = request.options.for_build()
        # Every check of the plan, for one that reads a later stage's (the build, the cache).
        # `lookups`: the whole plan where `--stage` narrowed this run's, so that a build run
        # alone still substitutes from the cache of a distribution stage it left out.
        read = lookups or plan
        planned = tuple(PlannedCheck(s.name, c) for s in read.stages for c in s.checks) if read else ()
        self.runner = StageRunner(
            run, config, arms, events, saved.profile, {**options, **given}, self.source, stamp, planned
        )
        self.timings: dict[str, float] = dict(saved.timings)
        self.blocked_by: tuple[str, str] | None = None
        self._hosts: dict[str, str | None] = {}  # each stage's `requires` answer on this host

    def stage_hash(self, stage: StageSpec) -> str:
        builds = any(kind_named(c.kind, c.name).builds_arms for c in stage.checks)
        stage_arms = (
            dict(self.runner.arms) if builds else {r: self.runner.arms[r] for r in _stage_roles(stage)}
        )
        return inputs_hash(stage.as_json(), stage_arms, self.config, source=self.source if builds else None)

    def _kept(self, stage: StageSpec, stage_hash: str) -> str | None:
        """Why the saved result of `stage` is kept as it is (None: it runs, or is blocked)."""
        wanted = self.selected is None or stage.name in self.selected
        outcome = stage_outcome(self.run, stage)
        return _keep(self.run, stage, outcome, stage_hash, wanted, self.selected is None, self.request.force)

    def will_run(self, stage: StageSpec) -> bool:
        """Whether `step` would measure this stage (not keep it, block it or skip it here)."""
        kept = self._kept(stage, self.stage_hash(stage))
        runs = kept is None and (self.blocked_by is None or self.request.no_gate)
        return runs and self.host_cannot(stage) is None

    def host_cannot(self, stage: StageSpec) -> str | None:
        """Why this host cannot run `stage` at all (its `requires` command said so), or None.
        Asked once per stage and attempt."""
        if stage.requires is None:
            return None
        if stage.name not in self._hosts:
            values = {**self.config.vars, "project": str(self.config.root), "run_dir": str(self.run.path)}
            code, text = process.capture(expand(stage.requires, values), cwd=self.config.root, timeout_s=120)
            said = " ".join(text.split()) or f"exit code {code}"
            self._hosts[stage.name] = None if code == 0 else f"not run on this host: {said}"
        return self._hosts[stage.name]

    def step(self, stage: StageSpec, measured: Mapping[str, Measure] | None = None) -> Verdict | StageState:
        """Keep, block or run `stage`; `measured` replaces the measurement of the checks it names
        (a run set measures a bench once for all its members)."""
        run, events, request = self.run, self.events, self.request
        stage_hash = self.stage_hash(stage)
        keep = self._kept(stage, stage_hash)
        outcome: Verdict | StageState
        if keep is not None:
            # A stale stage still gates by the verdict it had; the run verdict counts it STALE.
            outcome = saved_verdict(run, stage)
            stale = isinstance(outcome, Verdict) and mark_stale(run, stage.folder, stage_hash)
            if stale:
                keep = "STALE: kept, but its inputs changed since it ran; rerun it to qualify"
            events.stage_end(stage, StageState.STALE.value if stale else outcome.value, keep)
        elif self.blocked_by is not None and not request.no_gate:
            name, why = self.blocked_by
            self.runner.blocked(stage, name, why)
            events.stage_end(stage, StageState.BLOCKED.value, f"blocked by {name} ({why})")
            outcome = StageState.BLOCKED
        elif (cannot := self.host_cannot(stage)) is not None:
            # Nothing here could measure it (no device of its kind): SKIPPED with the reason,
            # never passed, and the run stays INCOMPLETE until a host that can runs it.
            self.runner.skipped(stage, cannot, stage_hash=stage_hash)
            events.stage_end(stage, Verdict.SKIPPED.value, cannot)
            outcome = Verdict.SKIPPED
        else:
            ungated = self.blocked_by is not None
            note = f"{self.blocked_by[0]} ({self.blocked_by[1]})" if self.blocked_by else None
            events.stage_start(stage, f"UNGATED: runs past {note}" if ungated else "")
            t0 = time.monotonic()
            outcome = self.runner.execute(
                stage, stage_hash=stage_hash, ungated=ungated, gate_note=note, measured=measured or {}
            )
            self.timings[stage.name] = round(time.monotonic() - t0, 3)
            update_run(run, timings=self.timings)
            # A build stage records store paths; later stages fill {out} and {bin} from them.
            self.runner.arms = with_build_facts(dict(self.runner.arms), RunRecord.load(run))
            events.stage_end(stage, outcome.value, _saved_reason(run, stage))
        # FAIL, ERROR and INCONCLUSIVE gate; so does a stage that has no result (not run,
        # interrupted, itself blocked): nothing downstream may count on it.
        if self.blocked_by is None and (outcome in GATE_BLOCKING or isinstance(outcome, StageState)):
            self.blocked_by = (stage.name, outcome.value)
        return outcome


def _keep(
    run: RunDir,
    stage: StageSpec,
    outcome: Verdict | StageState,
    stage_hash: str,
    wanted: bool,
    resuming: bool,
    force: bool,
) -> str | None:
    """Why a saved stage result is kept as it is, or None when the stage must run now."""
    if not wanted:
        return "kept (not selected)"
    # A stage skipped for want of a device is asked again: this host may be one that can.
    finished = isinstance(outcome, Verdict) and outcome is not Verdict.SKIPPED
    same = finished and _saved_hash(run, stage) == stage_hash
    if resuming and finished and same and not force:
        return "kept (finished, inputs unchanged)"
    if outcome is Verdict.PASS and same and not force:
        return "kept (PASS with unchanged inputs; --force reruns it)"
    return None


def _stage_roles(stage: StageSpec) -> set[str]:
    return {role for check in stage.checks for role in check.roles}


def _saved_hash(run: RunDir, stage: StageSpec) -> str | None:
    path = run.stage_dir(stage.folder) / STAGE
    return StageRecord.load(path).inputs_hash if path.is_file() else None


def _saved_reason(run: RunDir, stage: StageSpec) -> str:
    path = run.stage_dir(stage.folder) / STAGE
    return StageRecord.load(path).reason if path.is_file() else ""
