"""A run's `run.json`: the roles bound to arms, the document a new run starts with, what a
resume brings up to date, and the verdict written when the stages are over."""

from __future__ import annotations

from typing import Any

from qualify import __version__
from qualify.core import provenance
from qualify.core.config import ProjectConfig
from qualify.core.context import RoleArm
from qualify.core.errors import ConfigError, UsageError
from qualify.core.recordredaction import redact_ref
from qualify.core.runstore import RunDir, now_iso
from qualify.core.verdicts import RunVerdict
from qualify.pipeline.ondisk import run_on_disk
from qualify.pipeline.plan import Plan
from qualify.pipeline.planfiles import plan_files
from qualify.pipeline.request import RunRequest
from qualify.records.run import RunRecord, update_run


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
    record = RunRecord.load(run)
    arms = with_build_facts(arms, record)
    _check_same_roles(record, arms)
    # Build options given again on a rerun replace the saved ones; otherwise they stay.
    options = request.options.given_again(record.options)
    update_run(
        run,
        status="running",
        profile=plan.profile,
        plan=plan.as_json(),
        options=options,
        invocations=[*record.invocations, _invocation(request)],
        config=config.snapshot(),
    )
    return arms


def finish_run(run: RunDir, plan: Plan) -> RunVerdict:
    """Mark the run complete and write the verdict its saved stages give."""
    update_run(run, status="complete", finished_at=now_iso())
    return record_verdict(run)


def end_run(run: RunDir, status: str, **facts: Any) -> None:
    """Mark the run stopped (`interrupted`, `failed`) and write the verdict its stages give now:
    an earlier attempt's verdict never outlives a rerun that did not finish."""
    update_run(run, status=status, **facts)
    record_verdict(run)


def record_verdict(run: RunDir) -> RunVerdict:
    """Write the verdict derived from the stages on disk into run.json, for readers of the file
    (qualify itself always derives it again: `ondisk.run_on_disk`)."""
    derived = run_on_disk(run)
    update_run(
        run,
        verdict=derived.verdict.value,
        exit_code=int(derived.exit_code),
        stages={name: o.value for name, o in derived.stages.items()},
    )
    return derived.verdict


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


def with_build_facts(arms: dict[str, RoleArm], record: RunRecord) -> dict[str, RoleArm]:
    """The arms with the store paths their build recorded (none before the build stage)."""
    out = {}
    for role, bound in arms.items():
        facts = record.roles.get(role)
        out[role] = RoleArm(role, bound.arm, facts.out if facts else None, facts.drv if facts else None)
    return out


def _check_same_roles(record: RunRecord, arms: dict[str, RoleArm]) -> None:
    for role, bound in arms.items():
        before = record.roles.get(role)
        if before is None:
            continue
        # run.json keeps the installable as recorded: a URL's token redacted (or, in a run
        # saved before that, in clear).
        now = redact_ref(bound.arm.installable)
        if before.arm != bound.arm.name or before.installable not in (bound.arm.installable, now):
            raise UsageError(
                f"run {record.run.run_id}: the {role} role was arm {before.arm!r} "
                f"({redact_ref(before.installable)}), qualify.toml now gives {bound.arm.name!r} ({now})",
                "start a new run; a run compares one fixed pair of arms",
            )


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
        **request.options.invoked(),
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
        "project": {"root": str(config.root), "config": str(config.path), "flake": redact_ref(config.flake)},
        "roles": {
            role: {
                "arm": bound.arm.name,
                "installable": redact_ref(bound.arm.installable),
                "devshell": redact_ref(bound.arm.devshell),
                "drv": None,
                "out": None,
            }
            for role, bound in arms.items()
        },
        "profile": plan.profile,
        "plan": plan.as_json(),
        # What a rerun's plan is compared with; kept as it is by every later attempt.
        "plan_files": plan_files(config).as_json(),
        "config": config.snapshot(),
        "provenance": provenance.collect(config.root, request.host_label),
        "timings": {},
        "options": request.options.recorded(),
        "invocations": [_invocation(request)],
    }
