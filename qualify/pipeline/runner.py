"""The pipeline: roles bound to arms, stages run in order, each gating the next.

`qualify run` starts a run, resumes an interrupted one (`--run ID`), or reruns part of a
saved run (`--only STAGE`, `--from STAGE`), each rerun a new attempt with the old one moved
under `attempts/`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify import __version__
from qualify.checks.base import Measure
from qualify.checks.registry import kind_named
from qualify.core import provenance
from qualify.core.config import ProjectConfig, load_config
from qualify.core.context import RoleArm
from qualify.core.errors import ConfigError, ExitCode, UsageError
from qualify.core.groups import end_recorded_groups, recording_groups
from qualify.core.runstore import (
    RunDir,
    new_run,
    now_iso,
    open_run,
    read_json,
    write_json,
)
from qualify.core.verdicts import (
    GATE_BLOCKING,
    RunVerdict,
    StageState,
    Verdict,
    exit_code_for,
    run_verdict,
)
from qualify.pipeline.events import Events
from qualify.pipeline.plan import DEFAULT_ORDER, Plan, StageSpec, load_plan
from qualify.pipeline.preflight import require_clean_tree, require_nix, will_build
from qualify.pipeline.stagerun import (
    STAGE,
    StageRunner,
    inputs_hash,
    mark_stale,
    saved_verdict_at,
    stage_outcome,
)
from qualify.pipeline.templates import check_templates

#: The process groups a run started (a JSON line each), read back by the next attempt.
PROCESSES = "processes.jsonl"


@dataclass(frozen=True)
class RunRequest:
    project: Path
    candidate: str | None = None
    pinned: str | None = None
    profile: str | None = None
    run_id: str | None = None
    only: str | None = None
    from_stage: str | None = None
    force: bool = False
    no_gate: bool = False
    runs_dir: Path | None = None
    allow_dirty: bool = False
    override_inputs: tuple[tuple[str, str], ...] = ()
    #: nix settings for every nix call of the build stage (remote builders, max-jobs).
    nix_options: tuple[tuple[str, str], ...] = ()
    #: What the host's owners call it (a CI runner label, "strix-halo-3"), kept in provenance.
    host_label: str | None = None
    #: Every `--candidate` given (a run set when more than one, or when the project has controls).
    candidates: tuple[str, ...] = ()
    #: Run the project's `[controls]` with the candidates (`--no-controls` turns it off).
    controls: bool = True

    def __post_init__(self) -> None:
        if self.candidate and not self.candidates:
            object.__setattr__(self, "candidates", (self.candidate,))


@dataclass(frozen=True)
class RunOutcome:
    run: RunDir
    verdict: RunVerdict | None  # None when interrupted
    exit_code: ExitCode


def parse_overrides(values: list[str]) -> tuple[tuple[str, str], ...]:
    """`NAME=FLAKEREF` pairs from `--override-input`."""
    return _pairs(values, "--override-input", "NAME=FLAKEREF", "nixpkgs-rocm10=github:me/nixpkgs/rocm-10.1")


def parse_nix_options(values: list[str]) -> tuple[tuple[str, str], ...]:
    """`NAME=VALUE` pairs from `--nix-option` (the value may hold `=` and spaces)."""
    return _pairs(values, "--nix-option", "NAME=VALUE", "'builders=ssh-ng://gpu-builder x86_64-linux'")


def _pairs(values: list[str], flag: str, form: str, example: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise UsageError(f"{flag} {value!r}: expected {form}", f"for example {flag} {example}")
        pairs.append((name, rest))
    return tuple(pairs)


def runs_dir_for(config: ProjectConfig, override: Path | None) -> Path:
    if override is not None:
        return override
    env = os.environ.get("QUALIFY_RUNS_DIR")
    return Path(env) if env else config.runs_dir


def execute(request: RunRequest, events: Events) -> RunOutcome:
    """Run (or resume, or partly rerun) a qualification; the run directory holds the result."""
    from qualify.pipeline.runset import execute_set, is_set, wants_set

    if request.only and request.from_stage:
        raise UsageError("--only and --from cannot be combined", "pick one stage selection")
    config = load_config(request.project)
    runs_dir = runs_dir_for(config, request.runs_dir)
    existing = request.run_id is not None or request.only or request.from_stage
    if existing:
        run = open_run(runs_dir, request.run_id)
        saved = run.read()
        if is_set(saved):
            return execute_set(request, events, run)
        candidate = request.candidates[0] if request.candidates else saved["roles"]["candidate"]["arm"]
        if len(request.candidates) > 1 or candidate != saved["roles"]["candidate"]["arm"]:
            raise UsageError(
                f"run {run.run_id} qualifies candidate {saved['roles']['candidate']['arm']!r}, "
                f"not {', '.join(request.candidates)}",
                "start a new run for another candidate (omit --run)",
            )
        profile = request.profile if request.profile is not None else saved.get("profile")
    else:
        if not request.candidates:
            raise UsageError("which arm is the candidate?", "pass --candidate ARM")
        if wants_set(config, request):
            return execute_set(request, events, None)
        candidate = request.candidates[0]
        profile = request.profile
        run = None
    plan = load_plan(config.plan_dir, profile)
    arms = bind_roles(config, plan, candidate, request.pinned)
    # Everything that can be known wrong is refused here, before a build or a run directory.
    check_templates(plan, config, arms)
    require_nix(plan)
    saved_options = run.read().get("options", {}) if run is not None else {}
    allowed = request.allow_dirty or bool(saved_options.get("allow_dirty"))
    if will_build(run, plan, selected_stages(plan, request)):
        require_clean_tree(config, allowed)
    if run is None:
        run = new_run(runs_dir, candidate)
        with run.locked():
            write_json(run.run_json, new_run_document(run, config, plan, arms, request))
    selected = selected_stages(plan, request)
    with run.locked():
        arms = refresh_saved_run(run, config, plan, arms, request, existing=bool(existing))
        # What a dead attempt left running is ended first (its watchers normally did already).
        for ended in end_recorded_groups(run.path / PROCESSES):
            events.echo(f"ended {ended}, left running by an earlier attempt")
        try:
            with recording_groups(run.path / PROCESSES):
                try:
                    _run_stages(run, config, plan, arms, selected, request, events)
                finally:
                    events.close()
        except KeyboardInterrupt:
            run.update(status="interrupted", interrupted_at=now_iso())
            return RunOutcome(run, None, ExitCode.INTERRUPTED)
        except BaseException as exc:
            # Every exit path leaves the status saying what happened, never "running".
            run.update(status="failed", failed_at=now_iso(), error=f"{type(exc).__name__}: {exc}")
            raise
        verdict = finish_run(run, plan)
    return RunOutcome(run, verdict, exit_code_for(verdict))


def refresh_saved_run(
    run: RunDir,
    config: ProjectConfig,
    plan: Plan,
    arms: dict[str, RoleArm],
    request: RunRequest,
    *,
    existing: bool,
) -> dict[str, RoleArm]:
    """A resumed or rerun run's roles with what its build learned, its options and invocations
    brought up to date (the caller holds its lock)."""
    if not existing:
        return arms
    saved = run.read()
    arms = _with_build_facts(arms, saved)
    _check_same_roles(run, saved, arms)
    # Build options given again on a rerun replace the saved ones; otherwise they stay.
    options = dict(saved.get("options", {}))
    if request.allow_dirty:
        options["allow_dirty"] = True
    if request.override_inputs:
        options["override_inputs"] = [list(o) for o in request.override_inputs]
    if request.nix_options:
        options["nix_options"] = [list(o) for o in request.nix_options]
    run.update(
        status="running",
        profile=plan.profile,
        plan=plan.as_json(),
        options=options,
        invocations=[*saved.get("invocations", []), _invocation(request)],
        config=config.snapshot(),
    )
    return arms


def finish_run(run: RunDir, plan: Plan) -> RunVerdict:
    """The run's verdict from its saved stages, written to its run.json."""
    verdict, outcomes = summarize(run, plan)
    run.update(
        status="complete",
        verdict=verdict.value,
        exit_code=int(exit_code_for(verdict)),
        stages={name: o.value for name, o in outcomes.items()},
        finished_at=now_iso(),
    )
    return verdict


def bind_roles(config: ProjectConfig, plan: Plan, candidate: str, pinned: str | None) -> dict[str, RoleArm]:
    """Which arm plays which role. An A/A run binds one arm to both, in separate folders."""
    arms = {
        "pinned": RoleArm("pinned", config.arm(pinned or config.pinned, role="pinned")),
        "candidate": RoleArm("candidate", config.arm(candidate, role="candidate")),
    }
    if "reference" in plan.roles_needed():
        if config.reference is None:
            users = [f"{s.name}/{c.name}" for s in plan.stages for c in s.checks if "reference" in c.roles]
            raise ConfigError(
                f"{config.path}: the plan's check(s) {', '.join(users)} measure the reference "
                "role, but no reference arm is defined",
                'add [arms.reference] or `reference = "<arm>"` to qualify.toml',
            )
        arms["reference"] = RoleArm("reference", config.arm(config.reference, role="reference"))
    return arms


def _with_build_facts(arms: dict[str, RoleArm], saved: dict[str, Any]) -> dict[str, RoleArm]:
    out = {}
    for role, bound in arms.items():
        facts = saved.get("roles", {}).get(role, {})
        out[role] = RoleArm(role, bound.arm, facts.get("out"), facts.get("drv"))
    return out


def _check_same_roles(run: RunDir, saved: dict[str, Any], arms: dict[str, RoleArm]) -> None:
    for role, bound in arms.items():
        before = saved.get("roles", {}).get(role)
        if before is None:
            continue
        if before.get("arm") != bound.arm.name or before.get("installable") != bound.arm.installable:
            raise UsageError(
                f"run {run.run_id}: the {role} role was arm {before.get('arm')!r} "
                f"({before.get('installable')}), qualify.toml now gives {bound.arm.name!r} "
                f"({bound.arm.installable})",
                "start a new run; a run compares one fixed pair of arms",
            )


def selected_stages(plan: Plan, request: RunRequest) -> set[str] | None:
    """Stages to rerun explicitly (None: every stage that has no finished result yet)."""
    names = [s.name for s in plan.stages]
    if request.only:
        return {plan.stage(request.only).name}
    if request.from_stage:
        start = names.index(plan.stage(request.from_stage).name)
        return set(names[start:])
    return None


def _run_stages(
    run: RunDir,
    config: ProjectConfig,
    plan: Plan,
    arms: dict[str, RoleArm],
    selected: set[str] | None,
    request: RunRequest,
    events: Events,
) -> None:
    loop = StageLoop(run, config, arms, selected, request, events)
    for stage in plan.stages:
        loop.step(stage)


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
    ) -> None:
        saved = run.read()
        options = saved.get("options", {})
        provenance_ = saved.get("provenance", {})
        self.source = {
            "git": provenance_.get("git"),
            "flake_lock": (provenance_.get("flake_lock") or {}).get("sha256"),
            "options": options,
        }
        self.run, self.config, self.selected, self.request, self.events = (
            run,
            config,
            selected,
            request,
            events,
        )
        self.saved = saved
        self.runner = StageRunner(run, config, arms, events, saved.get("profile"), options, self.source)
        self.timings: dict[str, float] = dict(saved.get("timings", {}))
        self.blocked_by: tuple[str, str] | None = None

    def stage_hash(self, stage: StageSpec) -> str:
        builds = any(kind_named(c.kind, c.name).builds_arms for c in stage.checks)
        stage_arms = (
            dict(self.runner.arms) if builds else {r: self.runner.arms[r] for r in _stage_roles(stage)}
        )
        return inputs_hash(stage.as_json(), stage_arms, self.config, source=self.source if builds else None)

    def will_run(self, stage: StageSpec) -> bool:
        """Whether `step` would measure this stage (not keep it, not block it)."""
        outcome = stage_outcome(self.run, stage)
        wanted = self.selected is None or stage.name in self.selected
        keep = _keep(
            self.run,
            stage,
            outcome,
            self.stage_hash(stage),
            wanted,
            self.selected is None,
            self.request.force,
        )
        return keep is None and (self.blocked_by is None or self.request.no_gate)

    def step(self, stage: StageSpec, measured: Mapping[str, Measure] | None = None) -> Verdict | StageState:
        """Keep, block or run `stage`; `measured` replaces the measurement of the checks it names
        (a run set measures a bench once for all its members)."""
        run, events, request = self.run, self.events, self.request
        outcome = stage_outcome(run, stage)
        stage_hash = self.stage_hash(stage)
        wanted = self.selected is None or stage.name in self.selected
        keep = _keep(run, stage, outcome, stage_hash, wanted, self.selected is None, request.force)
        if keep is not None:
            # A stale stage still gates by the verdict it had; the run verdict counts it STALE.
            outcome = saved_verdict_at(run, stage.folder)
            stale = isinstance(outcome, Verdict) and mark_stale(run, stage.folder, stage_hash)
            if stale:
                keep = "STALE: kept, but its inputs changed since it ran; rerun it to qualify"
            events.stage_end(stage, StageState.STALE.value if stale else outcome.value, keep)
        elif self.blocked_by is not None and not request.no_gate:
            name, why = self.blocked_by
            self.runner.blocked(stage, name, why)
            events.stage_end(stage, StageState.BLOCKED.value, f"blocked by {name} ({why})")
            outcome = StageState.BLOCKED
        else:
            ungated = self.blocked_by is not None
            note = f"{self.blocked_by[0]} ({self.blocked_by[1]})" if self.blocked_by else None
            events.stage_start(stage, f"UNGATED: runs past {note}" if ungated else "")
            t0 = time.monotonic()
            outcome = self.runner.execute(
                stage, stage_hash=stage_hash, ungated=ungated, gate_note=note, measured=measured or {}
            )
            self.timings[stage.name] = round(time.monotonic() - t0, 3)
            run.update(timings=self.timings)
            # A build stage records store paths; later stages fill {out} and {bin} from them.
            self.runner.arms = _with_build_facts(dict(self.runner.arms), run.read())
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
    finished = isinstance(outcome, Verdict)
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
    return read_json(path).get("inputs_hash") if path.is_file() else None


def _saved_reason(run: RunDir, stage: StageSpec) -> str:
    path = run.stage_dir(stage.folder) / STAGE
    return str(read_json(path).get("reason", "")) if path.is_file() else ""


def summarize(run: RunDir, plan: Plan) -> tuple[RunVerdict, dict[str, Verdict | StageState]]:
    """The run verdict from the saved stages, with every default stage the plan leaves out."""
    outcomes: dict[str, Verdict | StageState] = {s.name: stage_outcome(run, s) for s in plan.stages}
    for name in DEFAULT_ORDER:
        outcomes.setdefault(name, StageState.NOT_CONFIGURED)
    return run_verdict(outcomes, DEFAULT_ORDER), outcomes


def _invocation(request: RunRequest) -> dict[str, Any]:
    return {
        "at": now_iso(),
        "candidate": request.candidate,
        "candidates": list(request.candidates),
        "controls": request.controls,
        "profile": request.profile,
        "only": request.only,
        "from": request.from_stage,
        "force": request.force,
        "no_gate": request.no_gate,
        "allow_dirty": request.allow_dirty,
        "override_inputs": [list(o) for o in request.override_inputs],
        "nix_options": [list(o) for o in request.nix_options],
    }


def new_run_document(
    run: RunDir,
    config: ProjectConfig,
    plan: Plan,
    arms: dict[str, RoleArm],
    request: RunRequest,
) -> dict[str, Any]:
    return {
        "qualify_version": __version__,
        "run_id": run.run_id,
        "created_at": now_iso(),
        "status": "running",
        "project": {"root": str(config.root), "config": str(config.path), "flake": config.flake},
        "roles": {
            role: {
                "arm": bound.arm.name,
                "installable": bound.arm.installable,
                "devshell": bound.arm.devshell,
                "drv": None,
                "out": None,
            }
            for role, bound in arms.items()
        },
        "profile": plan.profile,
        "plan": plan.as_json(),
        "config": config.snapshot(),
        "provenance": provenance.collect(config.root, request.host_label),
        "timings": {},
        "options": {
            "allow_dirty": request.allow_dirty,
            "override_inputs": [list(o) for o in request.override_inputs],
            "nix_options": [list(o) for o in request.nix_options],
        },
        "invocations": [_invocation(request)],
    }
