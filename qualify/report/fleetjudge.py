"""Each host's run re-decided from its measurements before a fleet report takes its verdict.

A host's folder is someone else's word: its run.json, stage.json and result.json can all say
PASS over measurements that are not there, or over limits loosened after the run. So `qualify
merge` judges every check of a host's copy again, through the same machinery as `qualify report
--rejudge` (`qualify.pipeline.rejudge`), with the limits of the plan the host's run.json records:
the plan compared across hosts (`fleetinputs.identity`), not the limits a result.json carries.
A run set's members are re-decided with their share of the set's plan, then the set's verdict.

A host whose checks cannot be re-decided here (a check kind this qualify does not know, a result
that names another kind than its plan, records that do not parse, the stages' libraries not
installed) is reported as not re-judged: its verdict is not taken, whatever its files say.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from qualify.core.errors import QualifyError, RunStoreError
from qualify.core.labels import name_problem
from qualify.core.runstore import RunDir
from qualify.core.verdicts import RunVerdict, Verdict
from qualify.pipeline.plan import Plan
from qualify.pipeline.recordplan import recorded_plan
from qualify.records import seal
from qualify.records.result import CheckResult
from qualify.records.run import RunRecord
from qualify.report.fleetinputs import HostRun
from qualify.report.model import ReportModel

#: What a record that qualify did not write as it is raises while it is read (named, not internal).
MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def rejudge_host(run: RunDir) -> str | None:
    """Re-decide every check of the host's copy `run` (a run or a run set) from its saved
    measurements; None when done, else why it could not be."""
    from qualify.pipeline.rejudge import rejudge, rejudge_set

    missing = missing_libraries()
    if missing:
        return (
            f"the stages' libraries its judges need are not installed here ({', '.join(missing)}); "
            "pip install 'qualify[stages]' and merge again"
        )
    try:
        record = RunRecord.load(run)
        plan = recorded_plan(record)
        for folder, share in _shares(record, plan):
            _kinds_agree(folder, share)
        if record.is_set:
            rejudge_set(run, plan)
        else:
            rejudge(run, plan)
    except QualifyError as exc:
        return _inside(run, exc.message)
    except MALFORMED as exc:
        return _inside(
            run, f"{run.run_json}: a record qualify did not write as it is: {type(exc).__name__}: {exc}"
        )
    return None


def _inside(run: RunDir, message: str) -> str:
    """`message` with the host's files named inside the fleet's folder (hosts/<key>/...), not
    in the folder the fleet is written in before it takes its place."""
    return message.replace(f"{run.path.parent.parent}/", "")


def missing_libraries() -> list[str]:
    """The stages' libraries (the `stages` extra) not installed: the judges import them."""
    from qualify.pipeline.preflight import STAGE_LIBRARIES

    return [name for name, module in STAGE_LIBRARIES.items() if importlib.util.find_spec(module) is None]


def _shares(record: RunRecord, plan: Plan) -> Iterator[tuple[Path, Plan]]:
    """Each folder of checks with the plan it is re-decided by: the run's own, or each member's
    share of its set's plan."""
    run = record.run
    if not record.is_set:
        yield run.path, plan
        return
    from qualify.pipeline.members import member_plan

    members = list(record.members)
    for member in members:
        if (run.path / member.label / "run.json").is_file():
            yield run.path / member.label, member_plan(plan, member, members)


def _kinds_agree(folder: Path, plan: Plan) -> None:
    """Every saved result is of the kind its check has in the plan: a result of another kind
    would be re-decided by its own saved limits, not the plan's."""
    for stage in plan.stages:
        for check in stage.checks:
            if (problem := name_problem(check.name)) is not None:
                raise RunStoreError(
                    f"{folder / 'run.json'}: check {check.name!r} of stage {stage.name!r}: {problem}",
                    "merge the run folder as qualify wrote it",
                )
            path = folder / stage.folder / check.name / "result.json"
            if not path.is_file():
                continue
            kind = CheckResult.load(path).judged_as
            if kind != check.kind:
                raise RunStoreError(
                    f"{path}: a result of kind {kind!r}, where the plan its run records has {check.kind!r}",
                    "merge the run folder as qualify wrote it",
                )


#: How a host's seal reads where this host made it (`qualify.records.sealdoc.SealState.words`).
VERIFIED = "sealed and verified"


def seal_words(run: RunDir) -> str:
    """Whether the host's records are as its qualify sealed them, and whether this host can
    vouch for that seal (only one made with this host's key verifies here)."""
    problem, state = seal.run_problem(run.path)
    return problem or state.words


def seal_notes(seals: list[tuple[str, str]]) -> list[str]:
    """What the fleet does not prove of each host (key, seal words) whose seal this host cannot
    verify: its records are judged as its folder holds them."""
    return [
        f"{key}: {words}: its folder is judged as it holds it; that its own qualify wrote it "
        "cannot be checked here."
        for key, words in seals
        if words not in ("", VERIFIED)
    ]


def not_rejudged_notes(hosts: list[HostRun]) -> list[str]:
    """What the fleet does not prove of the hosts that could not be re-judged here."""
    return [
        f"{h.key} was not re-judged from its measurements here, so nothing its records say is "
        f"taken: {h.not_rejudged}"
        for h in hosts
        if h.not_rejudged is not None
    ]


def not_rejudged_model(model: ReportModel, why: str) -> ReportModel:
    """A host's member whose checks could not be re-decided: what its records say is not taken.
    Each stage and check is ERROR (no judgement could be made here), the member INCOMPLETE."""
    said = f"not re-judged here: {why}"
    stages = [
        replace(
            stage,
            outcome=Verdict.ERROR.value,
            reason=said,
            why=said,
            checks=[replace(c, verdict=Verdict.ERROR.value, reason=said) for c in stage.checks],
        )
        if stage.configured
        else stage
        for stage in model.stages
    ]
    return replace(model, verdict=RunVerdict.INCOMPLETE.value, verdict_note="not re-judged", stages=stages)
