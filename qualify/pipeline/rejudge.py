"""`qualify report ID --rejudge`: decide a saved run again with the plan's current limits.

Every check kind's `judge` is a pure function of the check's saved data and its limits, so a
run can be re-decided without measuring again. For each check of the run, the current plan's
check of the same stage and name gives the limits (a check the current plan no longer has keeps
its saved limits); the saved parameters are kept, since they describe what was measured. The
first rejudgement keeps the measured decision in `result.measured.json` beside `result.json`
(nothing is lost); every result, stage and the run record what changed and when.

What it cannot do: a stage that a failing gate BLOCKED was never measured and stays BLOCKED;
a check SKIPPED where it ran (its stage's `requires` said the host cannot run it) was never
measured either and stays SKIPPED;
a stage that ran and now fails does not retroactively block the stages after it (the report
shows them as they ran).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from qualify.checks.base import SavedCheck
from qualify.checks.registry import kind_named
from qualify.core.checkspec import CheckSpec
from qualify.core.config import load_config
from qualify.core.errors import QualifyError, RunStoreError
from qualify.core.runstore import RunDir, now_iso, write_atomic
from qualify.core.verdicts import StageState, Verdict, stage_verdict
from qualify.pipeline.judging import crashed, judge_saved
from qualify.pipeline.ondisk import run_on_disk, stage_on_disk, status_of
from qualify.pipeline.plan import Plan, load_plan
from qualify.pipeline.stagerun import RESULT, STAGE, stage_reason
from qualify.records import seal
from qualify.records.rejudgements import RejudgedChange
from qualify.records.result import CheckResult
from qualify.records.run import RunRecord, update_run
from qualify.records.stage import StageRecord

MEASURED = "result.measured.json"


def project_root_for(run: RunDir, here: Path | None = None) -> Path:
    """The project whose plan re-decides `run`: the one it was made from (its saved root) while
    that still holds a qualify.toml, else `here`, the project the command was given (a run
    directory copied from another machine, such as a GPU host)."""
    root = RunRecord.load(run).project_root
    if root and Path(root, "qualify.toml").is_file():
        return Path(root)
    if here is None or not (here / "qualify.toml").is_file():
        raise QualifyError(
            f"run {run.run_id}: its project {root or '(not recorded)'} has no qualify.toml here",
            "run it from the project's directory (or give -C PROJECT): rejudge needs the plan "
            "whose limits it applies",
        )
    return here


def rejudge_with_project_plan(run: RunDir, here: Path | None = None) -> list[RejudgedChange]:
    """`rejudge` with the current plan of `project_root_for(run, here)`, resolved with the run's
    profile."""
    saved = RunRecord.load(run)
    if saved.kind == "fleet":
        raise QualifyError(
            f"{run.path} is a merged fleet report: its hosts' runs are re-decided where they were made",
            "rejudge each host's run (qualify report RUN --rejudge), then merge them again",
        )
    root = project_root_for(run, here)
    plan = load_plan(load_config(root).plan_dir, profile=saved.profile)
    if saved.is_set:
        return rejudge_set(run, plan)
    if saved.set_label is not None:
        # A member of a set is re-decided with its share of the plan, then the set's verdict.
        from qualify.pipeline.members import member_plan
        from qualify.pipeline.runset import summarize_set

        parent = RunDir(run.path.parent)
        members = list(RunRecord.load(parent).members)
        mine = next(m for m in members if m.label == saved.set_label)
        changes = rejudge(run, member_plan(plan, mine, members))
        summarize_set(parent)
        return changes
    return rejudge(run, plan)


def rejudge_set(run: RunDir, plan: Plan) -> list[RejudgedChange]:
    """Re-decide every member of a run set with its share of `plan`, then the set's verdict."""
    from qualify.pipeline.members import member_plan
    from qualify.pipeline.runset import summarize_set

    members = list(RunRecord.load(run).members)
    changes: list[RejudgedChange] = []
    for m in members:
        member = RunDir(run.path / m.label)
        if member.run_json.is_file():
            found = rejudge(member, member_plan(plan, m, members))
            changes += [c.model_copy(update={"stage": f"{m.label}/{c.stage}"}) for c in found]
    summarize_set(run)
    return changes


def rejudge(run: RunDir, plan: Plan) -> list[RejudgedChange]:
    """Re-decide every finished check of `run` with `plan`'s limits; return what changed."""
    record = RunRecord.load(run)
    if not os.access(run.path, os.W_OK):
        raise RunStoreError(
            f"{run.path}: the run folder is not writable",
            "rejudging writes the new verdicts beside the data: make it writable, or copy the "
            "run folder somewhere writable and rejudge the copy",
        )
    if status_of(run, record) == "running":
        raise QualifyError(
            f"run {run.run_id} is running now (a qualify process holds its lock)",
            "rejudge it once it has stopped",
        )
    current = {(s.name, c.name): c for s in plan.stages for c in s.checks}
    changes: list[RejudgedChange] = []
    for entry in record.stages:
        folder = run.stage_dir(entry.folder)
        if not (folder / STAGE).is_file():
            continue
        if stage_on_disk(run.path, entry.spec).outcome in (StageState.UNREADABLE, StageState.INTERRUPTED):
            # Files that do not read or do not agree are not data to decide from: the stage
            # stays as it is, and the run cannot qualify until it is run again.
            continue
        stage = StageRecord.load(folder / STAGE)
        if stage.complete and stage.verdict != StageState.BLOCKED.value:
            _rejudge_stage(stage, entry.name, current, changes)
    # The verdict saved for readers of the file, derived like every other: from the stages now.
    derived = run_on_disk(run)
    update_run(
        run,
        verdict=derived.verdict.value,
        exit_code=int(derived.exit_code),
        stages={name: o.value for name, o in derived.stages.items()},
        rejudged=[
            *(r.as_json() for r in record.rejudged),
            {"at": now_iso(), "plan": str(plan.source), "changed": [c.as_json() for c in changes]},
        ],
    )
    return changes


def _rejudge_stage(
    stage: StageRecord, name: str, current: dict[tuple[str, str], CheckSpec], changes: list[RejudgedChange]
) -> None:
    """Re-decide each check of a finished stage, then the stage's verdict and reason from them."""
    folder = stage.path.parent
    checks = []
    for listed in stage.checks:
        entry = listed
        change = _rejudge_check(folder / entry.name, current.get((name, entry.name)))
        # What the judge wrote beside the result (its tables, a log) is sealed with it.
        seal.note_folder(folder / entry.name)
        if change is not None:
            changes.append(change)
            entry = entry.model_copy(update={"verdict": change.after})
        if (folder / entry.name / RESULT).is_file():
            # The same verdict can come with other figures: the reason always follows.
            entry = entry.model_copy(update={"reason": CheckResult.load(folder / entry.name / RESULT).reason})
        checks.append(entry)
    verdicts = [Verdict(c.verdict) for c in checks]
    verdict = stage_verdict(verdicts, inconclusive_as_warn=stage.inconclusive == "warn")
    before: dict[str, Any] = (
        {"verdict_before_rejudge": stage.verdict} if verdict.value != stage.verdict else {}
    )
    stage.updated(
        checks=[c.to_json() for c in checks],
        verdict=verdict.value,
        reason=stage_reason(checks, verdict),
        rejudged_at=now_iso(),
        **before,
    ).save()


def _saved_again(saved: CheckResult, spec: CheckSpec) -> dict[str, Any]:
    """The result's spec with a rejudgement's limits and judge's parameters; a limit it left
    alone stays as it was saved (2 stays 2: the report shows the plan's figure)."""
    if saved.spec is None:
        return spec.as_json()
    kept = saved.spec.limits
    limits = {k: kept[k] if k in kept and kept[k] == v else v for k, v in spec.limits.items()}
    return {**saved.spec.model_dump(), "limits": limits, "params": spec.params}


def _rejudge_check(check_dir: Path, now: CheckSpec | None) -> RejudgedChange | None:
    result_path = check_dir / RESULT
    if not result_path.is_file():
        return None
    saved = CheckResult.load(result_path)
    measured = CheckResult.load(check_dir / MEASURED) if (check_dir / MEASURED).is_file() else saved
    if measured.verdict == Verdict.SKIPPED.value:
        # Never measured (its stage's `requires` said this host cannot run it): there is nothing
        # to judge, and judging nothing would read as a failure. It stays SKIPPED, with its reason.
        if saved.verdict != measured.verdict:
            write_atomic(result_path, (check_dir / MEASURED).read_bytes())
        return None
    measured_as = saved.measured_spec()
    limits_before: dict[str, float] = dict(saved.spec.limits) if saved.spec is not None else {}
    same_kind = now is not None and now.kind == measured_as.kind
    limits_after = dict(now.limits) if now is not None and same_kind else limits_before
    params = dict(measured_as.params)
    kind = kind_named(measured_as.kind, str(result_path))
    params_before = {n: params.get(n) for n in kind.judge_params}
    if now is not None and same_kind:
        params.update({n: now.params[n] for n in kind.judge_params if n in now.params})
    params_after = {n: params.get(n) for n in kind.judge_params}
    # Judged as measured, on the roles it measured, with the limits and judge's parameters now.
    spec = dataclasses.replace(measured_as, params=params, limits=limits_after, roles=tuple(saved.roles))
    if saved.crashed:
        judgement = crashed(saved.crashed)  # new limits cannot mend a crashed measurement
    else:
        judgement = judge_saved(kind, SavedCheck(check_dir, spec, spec.roles), "rejudge-error.log")
    if not (check_dir / MEASURED).is_file():
        # A copy written like every file of the run: atomically, never through a link.
        write_atomic(check_dir / MEASURED, result_path.read_bytes())
    saved.updated(
        **judgement.as_json(),
        spec=_saved_again(saved, spec),
        rejudged_at=now_iso(),
    ).save()
    unchanged = limits_after == limits_before and params_after == params_before
    if judgement.verdict.value == saved.verdict and unchanged:
        return None
    return RejudgedChange(
        stage=saved.stage,
        check=spec.name,
        before=saved.verdict,
        after=judgement.verdict.value,
        limits_before=limits_before,
        limits_after=limits_after,
        params_before={k: v for k, v in params_before.items() if params_after.get(k) != v},
        params_after={k: v for k, v in params_after.items() if params_before.get(k) != v},
    )
