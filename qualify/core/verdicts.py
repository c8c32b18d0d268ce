"""Verdicts of checks, stages and runs, and how they combine (docs/design.md, "Verdicts")."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from qualify.core.errors import ExitCode


class Verdict(StrEnum):
    """The judgement of one check, or the combined judgement of a stage."""

    PASS = "PASS"
    WARN = "WARN"
    INCONCLUSIVE = "INCONCLUSIVE"
    FAIL = "FAIL"
    ERROR = "ERROR"
    SKIPPED = "SKIPPED"


class StageState(StrEnum):
    """What a stage shows when it has no verdict of its own."""

    BLOCKED = "BLOCKED"
    NOT_CONFIGURED = "NOT CONFIGURED"
    #: The plan declares that the stage does not apply to this engine (`not_applicable = "…"`
    #: in its stage file: no server to serve or soak), with the reason. Unlike a stage merely
    #: missing, it does not keep the run from qualifying; every output names it.
    NOT_APPLICABLE = "NOT APPLICABLE"
    INTERRUPTED = "INTERRUPTED"
    NOT_RUN = "NOT RUN"
    #: Kept from an earlier attempt (`--only`, `--from`) although its inputs changed since:
    #: its verdict no longer speaks for this configuration, so the run cannot qualify.
    STALE = "STALE"
    #: Its stage.json or a result.json under it does not read, or they disagree (a file cut
    #: short, edited, or from another attempt): nothing it says can be counted.
    UNREADABLE = "UNREADABLE"


class RunVerdict(StrEnum):
    QUALIFIED = "QUALIFIED"
    NOT_QUALIFIED = "NOT QUALIFIED"
    INCOMPLETE = "INCOMPLETE"


# Worst first. A real failure is never hidden behind an error.
_SEVERITY = (Verdict.FAIL, Verdict.ERROR, Verdict.INCONCLUSIVE, Verdict.WARN, Verdict.PASS)

#: Stage verdicts that stop later stages from running (unless --no-gate).
GATE_BLOCKING = frozenset({Verdict.FAIL, Verdict.ERROR, Verdict.INCONCLUSIVE})


def stage_verdict(checks: Iterable[Verdict], *, inconclusive_as_warn: bool = False) -> Verdict:
    """Combine check verdicts: the worst counts; SKIPPED counts only when all are skipped.

    With `inconclusive_as_warn` (a stage's `inconclusive = "warn"`), an INCONCLUSIVE stage
    becomes WARN; the checks keep their own INCONCLUSIVE so the report can still say which.
    """
    verdicts = list(checks)
    counted = [v for v in verdicts if v is not Verdict.SKIPPED]
    if not counted:
        return Verdict.SKIPPED
    worst = min(counted, key=_SEVERITY.index)
    if worst is Verdict.INCONCLUSIVE and inconclusive_as_warn:
        return Verdict.WARN
    return worst


#: Why a stage of the plan is NOT CONFIGURED in a run narrowed to others (`--stage`).
LEFT_OUT = "left out of this run (--stage)"

#: Stage outcomes a qualified run may hold: decided for the candidate, or declared not to apply.
_QUALIFYING = (Verdict.PASS, Verdict.WARN, StageState.NOT_APPLICABLE)


def run_verdict(
    stages: dict[str, Verdict | StageState],
    required: Iterable[str],
    *,
    not_measuring: Iterable[str] = ("build", "distribution"),
) -> RunVerdict:
    """The run's verdict from the stage outcomes.

    `stages` maps every stage of the plan (and every stage of the default order that the plan
    leaves out, as NOT_CONFIGURED; or declares not applicable, as NOT_APPLICABLE) to its
    outcome; `required` is the default stage order. A run qualifies only when some stage other
    than those that measure nothing of the engine (`not_measuring`: the one that builds the
    arms, the one that caches them) decided: building is not qualifying, and a plan that
    declares every other stage not applicable has judged nothing of the engine.
    """
    outcomes = dict(stages)
    for name in required:
        outcomes.setdefault(name, StageState.NOT_CONFIGURED)
    values = list(outcomes.values())
    if any(v in (Verdict.FAIL, Verdict.INCONCLUSIVE) for v in values):
        return RunVerdict.NOT_QUALIFIED
    skipped = set(not_measuring)
    measured = [n for n, v in outcomes.items() if n not in skipped and v in (Verdict.PASS, Verdict.WARN)]
    if measured and all(v in _QUALIFYING for v in values):
        return RunVerdict.QUALIFIED
    return RunVerdict.INCOMPLETE


def exit_code_for(verdict: RunVerdict) -> ExitCode:
    return {
        RunVerdict.QUALIFIED: ExitCode.QUALIFIED,
        RunVerdict.NOT_QUALIFIED: ExitCode.NOT_QUALIFIED,
        RunVerdict.INCOMPLETE: ExitCode.INCOMPLETE,
    }[verdict]
