"""The pipeline: roles bound to arms, stages run in order, each gating the next.

`qualify run` starts a run, resumes an interrupted one (`--run ID`), or reruns part of a
saved run (`--only STAGE`, `--from STAGE`), each rerun a new attempt with the old one moved
under `attempts/`.

There is one engine. A run of one candidate is a run set of one member whose folder is the
run's own; a run set (several candidates, or a project's controls) keeps each member in a
folder of its own beside the set's record (`runset`). Either way the same code checks the
plan and the arms, takes the locks, ends what an earlier attempt left running, steps the
members' stages in order and records how the attempt ended.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

from qualify.core import provenance
from qualify.core.commanduser import chosen_user, require_reachable
from qualify.core.config import ProjectConfig, load_config
from qualify.core.containment import chosen, contained, runs_root
from qualify.core.context import RoleArm
from qualify.core.errors import ExitCode, UsageError
from qualify.core.groups import end_recorded_groups, recording_groups
from qualify.core.nixbuilders import builders_unprotected
from qualify.core.redaction import remember_urls
from qualify.core.runlist import new_run, open_run
from qualify.core.runstore import LockLostError, RunDir, now_iso
from qualify.core.sealkey import key_folder
from qualify.core.secretsources import remember_ambient
from qualify.core.verdicts import RunVerdict, exit_code_for
from qualify.pipeline.events import Events
from qualify.pipeline.members import member_plan, members_for
from qualify.pipeline.plan import Plan
from qualify.pipeline.planfiles import PlanStamp, plan_files, stamp
from qualify.pipeline.preflight import (
    builds_arms,
    require_clean_tree,
    require_flake,
    require_host,
    require_nix,
    require_recorded_plan,
    will_build,
)
from qualify.pipeline.request import (
    PROCESSES,
    RunOutcome,
    RunRequest,
    load_run_plan,
    narrowed,
    runs_dir_for,
    with_project_defaults,
)
from qualify.pipeline.rundoc import bind_roles, end_run, finish_run, new_run_document, refresh_saved_run
from qualify.pipeline.runset import (
    SET,
    MemberEvents,
    chosen_members,
    create_member,
    step_members,
    summarize_set,
    wants_set,
)
from qualify.pipeline.samegpus import require_same_gpus
from qualify.pipeline.stageloop import StageLoop
from qualify.pipeline.templates import check_templates
from qualify.records import seal
from qualify.records.run import Member, RunRecord, update_run
from qualify.records.seal import sealing

__all__ = ["RunOutcome", "RunRequest", "bind_roles", "execute", "selected_stages"]


@dataclass(frozen=True)
class Shape:
    """Who a run qualifies and where each member's folder is."""

    is_set: bool
    members: list[Member]
    #: The members this attempt works on (a rerun of a set may name some of them).
    chosen: list[Member]

    def folder(self, run: RunDir, member: Member) -> RunDir:
        return RunDir(run.path / member.label) if self.is_set else run

    def new_name(self) -> str:
        if self.is_set:
            return "+".join(m.label for m in self.members if m.role == "candidate")
        return self.members[0].arm


def execute(request: RunRequest, events: Events) -> RunOutcome:
    """Run (or resume, or partly rerun) a qualification; the run directory holds the result."""
    if request.only and request.from_stage:
        raise UsageError("--only and --from cannot be combined", "pick one stage selection")
    chosen()  # a misspelt QUALIFY_CONTAINMENT is refused now, not after the builds
    config = load_config(request.project)
    # Before any child runs: the secrets nix may use (NIX_CONFIG, nix.conf, netrc files) and
    # those in the URLs given, redacted from every output from the first line on.
    remember_ambient(settings=request.options.nix_options)
    remember_urls(ref for _, ref in request.options.override_inputs)
    runs_dir = runs_dir_for(config, request.runs_dir)
    # The commands run as another user: one that cannot reach the project or its runs is
    # refused now, not after the builds, with each command failing on "permission denied".
    require_reachable(chosen_user(), config.root, runs_dir)
    existing: RunDir | None = None
    saved: RunRecord | None = None
    if request.run_id is not None or request.only or request.from_stage:
        existing = open_run(runs_dir, request.run_id)
        saved = RunRecord.load(existing)
        if saved.set_label is not None and not saved.is_set:
            # A member of a run set is rerun as the set's member: its plan is its share of the
            # set's (a negative control's stages, alpha split over the members).
            existing = RunDir(existing.path.parent)
            request = replace(request, candidates=(saved.set_label,), run_id=str(existing.path))
            saved = RunRecord.load(existing)
    if saved is not None:
        request = _with_saved_stages(request, saved)
    # The plan is read from the working tree: a rerun's must be the one the run was made with.
    now = plan_files(config)
    if saved is not None:
        require_recorded_plan(saved, now, config, request.options.allow_dirty)
        assert existing is not None  # a saved record is read from its run's folder
        require_same_gpus(existing.path.name, saved.gpus, provenance.gpus())
    # qualify.toml's candidate and profile serve a new run that names none; a saved run keeps its own.
    from_config = existing is None and request.profile is None and config.profile is not None
    if existing is None:
        request = with_project_defaults(request, config)
    profile = request.profile if request.profile is not None or saved is None else saved.profile
    whole = load_run_plan(config, profile, from_config=from_config)
    plan = narrowed(whole, request.options.stages)
    if saved is None:
        kept = {s.name for s in plan.stages}
        left_out = [s.name for s in whole.stages if s.name not in kept]
        request = replace(request, options=request.options.narrowed(request.options.stages, left_out))
    shape = _shape(config, plan, request, existing, saved)
    plans = {m.label: member_plan(plan, m, shape.members) for m in shape.members}
    arms = {m.label: bind_roles(config, plans[m.label], m.arm, request.pinned) for m in shape.members}
    # Everything that can be known wrong is refused here, before a build or a run directory.
    for m in shape.members:
        check_templates(plans[m.label], config, arms[m.label])
    require_nix(plan)
    require_flake(plan, config)
    for m in shape.chosen:
        require_host(plans[m.label], config, selected_stages(plans[m.label], plan, request))
    allowed = request.options.allow_dirty or (saved is not None and saved.options.allow_dirty)
    builds = (
        will_build(
            shape.folder(existing, m) if existing else None,
            plans[m.label],
            selected_stages(plans[m.label], plan, request),
        )
        for m in shape.chosen
    )
    if any(builds):
        require_clean_tree(config, allowed)
    run = existing
    if run is None:
        run = new_run(runs_dir, shape.new_name())
        # Its number in the runs directory: the order runs are made in is what "the latest
        # run" means (`runlist.list_runs`), never a clock.
        numbered = {"sequence": run.sequence}
        with run.locked():
            if shape.is_set:
                # The set's record first, naming every member: a set stopped before its
                # members' folders exist is still a set that `show` reads and `--run` resumes.
                document = new_run_document(
                    run, config, plan, {"pinned": arms[shape.members[0].label]["pinned"]}, request
                )
                document.pop("roles")
                members = [m.as_json() for m in shape.members]
                RunRecord.parse(run, {"kind": SET, **document, **numbered, "members": members}).save()
            else:
                only = shape.members[0].label
                document = new_run_document(run, config, plans[only], arms[only], request)
                RunRecord.parse(run, {**document, **numbered}).save()
    recorded = now.files if saved is None else (saved.plan_files.files if saved.plan_files else None)
    ran_under = stamp(config, now, recorded)
    return _run_members(
        run,
        shape,
        config,
        plan,
        plans,
        arms,
        request,
        events,
        ran_under,
        resumed=saved is not None,
        lookups=whole if request.options.left_out else None,
    )


def _with_saved_stages(request: RunRequest, saved: RunRecord) -> RunRequest:
    """`request` resuming or rerunning `saved` with the stages the run was narrowed to: a run
    keeps its narrowing (`--stage` given again must name the same stages)."""
    kept = saved.options.stages
    asked_for = request.options.stages
    if asked_for is not None and set(asked_for) != set(kept or ()):
        asked = ", ".join(asked_for)
        had = "every stage" if kept is None else "only " + ", ".join(kept)
        raise UsageError(
            f"run {saved.run.run_id} runs {had}; --stage {asked} names others",
            "--stage narrows a new run; resume this one without it, or start a new run",
        )
    return replace(request, options=request.options.narrowed(kept, list(saved.options.left_out)))


def _shape(
    config: ProjectConfig,
    plan: Plan,
    request: RunRequest,
    existing: RunDir | None,
    saved: RunRecord | None,
) -> Shape:
    if saved is not None and saved.is_set:
        members = list(saved.members)
        return Shape(True, members, chosen_members(members, request.candidates, existing))
    if saved is not None and existing is not None:
        arm = saved.candidate_arm
        if arm is None:
            raise UsageError(f"{existing.run_json}: the run records no candidate", "start a new run")
        if len(request.candidates) > 1 or (request.candidates and request.candidates[0] != arm):
            raise UsageError(
                f"run {existing.run_id} qualifies candidate {arm!r}, not {', '.join(request.candidates)}",
                "start a new run for another candidate (omit --run)",
            )
        one = [Member(arm, arm, "candidate")]
        return Shape(False, one, one)
    if not request.candidates:
        others = sorted(set(config.arms) - {request.pinned or config.pinned})
        raise UsageError(
            "which arm is the candidate?",
            'pass --candidate ARM (repeatable), or set candidate = "ARM" in qualify.toml'
            + (f" (arms: {', '.join(others)})" if others else ""),
        )
    if wants_set(config, request):
        members = members_for(config, plan, request.candidates, controls=request.controls)
        return Shape(True, members, members)
    one = [Member(request.candidates[0], request.candidates[0], "candidate")]
    return Shape(False, one, one)


def _run_members(
    run: RunDir,
    shape: Shape,
    config: ProjectConfig,
    plan: Plan,
    plans: dict[str, Plan],
    arms: dict[str, dict[str, RoleArm]],
    request: RunRequest,
    events: Events,
    ran_under: PlanStamp,
    *,
    resumed: bool,
    lookups: Plan | None = None,
) -> RunOutcome:
    """Every chosen member's stages, stage by stage, under the run's locks; how the attempt
    ended is recorded in each member's run.json (and the set's) however it ends. `lookups`:
    the whole plan, whose checks a check may read, where `--stage` narrowed `plan`."""
    folders = {m.label: shape.folder(run, m) for m in shape.members}
    with ExitStack() as stack:
        stack.enter_context(run.locked())
        if shape.is_set:
            for m in shape.members:
                create_member(run, m, config, plans[m.label], arms[m.label], request)
            for m in shape.chosen:
                stack.enter_context(folders[m.label].locked())
            if resumed:
                update_run(
                    run, status="running", profile=plan.profile, plan=plan.as_json(), config=config.snapshot()
                )
        loops: dict[str, StageLoop] = {}
        for m in shape.chosen:
            folder = folders[m.label]
            bound = refresh_saved_run(
                folder, config, plans[m.label], arms[m.label], request, existing=resumed
            )
            heard = MemberEvents(events, m) if shape.is_set else events
            selected = selected_stages(plans[m.label], plan, request)
            loops[m.label] = StageLoop(
                folder, config, bound, selected, request, heard, ran_under, plans[m.label], lookups
            )
        # What a dead attempt left running is ended first (its watchers normally did already).
        for ended in end_recorded_groups(run.path / PROCESSES):
            events.echo(f"ended {ended}, left running by an earlier attempt")
        try:
            # The seal is entered first and left last: it is saved once the run's last process
            # has ended, and no command sees the folder of the key that authenticates it.
            stack.enter_context(sealing(run.path))
            nix = builders_unprotected() if builds_arms(plan) else None
            jail = stack.enter_context(
                contained(
                    runs_root(run.path), run.run_id, hidden=[key_folder()], also_missing=[nix] if nix else []
                )
            )
            update_run(run, containment=jail.describe())
            with recording_groups(run.path / PROCESSES):
                try:
                    _stages(run, shape, config, plan, plans, loops, events)
                    seal.check()  # nothing a command did changed what was judged
                finally:
                    events.close()
        except KeyboardInterrupt:
            _ended(run, shape, folders, "interrupted", interrupted_at=now_iso())
            return RunOutcome(run, None, ExitCode.INTERRUPTED)
        except LockLostError:
            # Another writer may hold the run now: this one writes nothing more, not even how
            # it ended (`show` calls it dead once no process holds a lock).
            raise
        except BaseException as exc:
            # Every exit path leaves the status saying what happened, never "running".
            _ended(run, shape, folders, "failed", failed_at=now_iso(), error=f"{type(exc).__name__}: {exc}")
            raise
        verdicts = [finish_run(folders[m.label], plans[m.label]) for m in shape.chosen]
        verdict: RunVerdict = verdicts[0]
        if shape.is_set:
            update_run(run, status="complete")
            verdict = summarize_set(run)
    return RunOutcome(run, verdict, exit_code_for(verdict))


def _stages(
    run: RunDir,
    shape: Shape,
    config: ProjectConfig,
    plan: Plan,
    plans: dict[str, Plan],
    loops: dict[str, StageLoop],
    events: Events,
) -> None:
    timings: dict[str, float] = dict(RunRecord.load(run).timings) if shape.is_set else {}
    for stage in plan.stages:
        t0 = time.monotonic()
        step_members(run, config, plans, loops, shape.chosen, stage, events)
        if shape.is_set:
            # The stage's wall time for the whole set, its shared measurements included (a
            # run of one records its own in the stage loop).
            timings[stage.name] = round(time.monotonic() - t0, 3)
            update_run(run, timings=timings)


def _ended(run: RunDir, shape: Shape, folders: dict[str, RunDir], status: str, **facts: Any) -> None:
    for m in shape.chosen:
        end_run(folders[m.label], status, **facts)
    if shape.is_set:
        update_run(run, status=status, **facts)
        summarize_set(run)


def selected_stages(own: Plan, plan: Plan, request: RunRequest) -> set[str] | None:
    """The stages a member reruns explicitly (`--only`, `--from`, read against the whole plan;
    a stage the member's plan leaves out selects none of its own); None: every stage that has
    no finished result yet."""
    names = {s.name for s in own.stages}
    if request.only:
        return {plan.stage(request.only).name} & names
    if request.from_stage:
        order = [s.name for s in plan.stages]
        start = order.index(plan.stage(request.from_stage).name)
        return set(order[start:]) & names
    return None
