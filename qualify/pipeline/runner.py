"""The pipeline: roles bound to arms, stages run in order, each gating the next.

`qualify run` starts a run, resumes an interrupted one (`--run ID`), or reruns part of a
saved run (`--only STAGE`, `--from STAGE`), each rerun a new attempt with the old one moved
under `attempts/`.
"""

from __future__ import annotations

from dataclasses import replace

from qualify.core.config import load_config
from qualify.core.errors import ExitCode, UsageError
from qualify.core.groups import end_recorded_groups, recording_groups
from qualify.core.runstore import RunDir, new_run, now_iso, open_run, write_json
from qualify.core.verdicts import exit_code_for
from qualify.pipeline.events import Events
from qualify.pipeline.plan import load_plan
from qualify.pipeline.preflight import require_clean_tree, require_nix, will_build
from qualify.pipeline.request import PROCESSES, RunOutcome, RunRequest, runs_dir_for
from qualify.pipeline.rundoc import (
    bind_roles,
    end_run,
    finish_run,
    new_run_document,
    refresh_saved_run,
    selected_stages,
)
from qualify.pipeline.stageloop import run_stages
from qualify.pipeline.templates import check_templates

__all__ = ["RunOutcome", "RunRequest", "bind_roles", "execute"]


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
        if saved.get("set"):
            # A member of a run set is rerun as the set's member: its plan is its share of the
            # set's (a negative control's stages, alpha split over the members).
            parent = RunDir(run.path.parent)
            member = replace(request, candidates=(str(saved["set"]["label"]),), run_id=str(parent.path))
            return execute_set(member, events, parent)
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
                    run_stages(run, config, plan, arms, selected, request, events)
                finally:
                    events.close()
        except KeyboardInterrupt:
            end_run(run, "interrupted", interrupted_at=now_iso())
            return RunOutcome(run, None, ExitCode.INTERRUPTED)
        except BaseException as exc:
            # Every exit path leaves the status saying what happened, never "running".
            end_run(run, "failed", failed_at=now_iso(), error=f"{type(exc).__name__}: {exc}")
            raise
        verdict = finish_run(run, plan)
    return RunOutcome(run, verdict, exit_code_for(verdict))
