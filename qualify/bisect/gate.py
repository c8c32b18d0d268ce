"""The gate a bisect watches, `STAGE` or `STAGE/CHECK`, and what one step's run folder says of
it: the step's outcome and its evidence, read from the files as derived on disk
(`qualify.pipeline.ondisk`), never from the verdict run.json saved."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.bisect.outcomes import Measured, Outcome
from qualify.core.errors import RunStoreError, UsageError
from qualify.core.runstore import RunDir
from qualify.core.tomlfile import suggest
from qualify.core.verdicts import StageState, Verdict
from qualify.pipeline.checkrecords import CheckResult
from qualify.pipeline.notapplicable import BUILD_STAGE
from qualify.pipeline.ondisk import RESULT, run_on_disk
from qualify.pipeline.plan import Plan

#: A gate's verdict and what the step it judged is, for the search.
OUTCOMES: dict[str, Outcome] = {
    Verdict.PASS.value: Outcome.GOOD,
    Verdict.WARN.value: Outcome.GOOD,
    Verdict.FAIL.value: Outcome.BAD,
    Verdict.INCONCLUSIVE.value: Outcome.UNDECIDED,
}


@dataclass(frozen=True)
class Gate:
    """A stage's verdict, or one check's of it."""

    stage: str
    folder: str
    check: str | None = None

    @property
    def label(self) -> str:
        return self.stage if self.check is None else f"{self.stage}/{self.check}"


def parse_gate(text: str, plan: Plan) -> Gate:
    """`STAGE` or `STAGE/CHECK`, each a name of the plan (refused with the closest name)."""
    name, _, check = text.partition("/")
    stage = plan.stage(name)  # a UsageError naming the closest stage
    if not check:
        return Gate(stage.name, stage.folder)
    checks = [c.name for c in stage.checks]
    if check not in checks:
        raise UsageError(
            f"--gate {text}: the stage {stage.name!r} has no check {check!r}{suggest(check, checks)}",
            f"checks of {stage.name}: " + ", ".join(checks),
        )
    return Gate(stage.name, stage.folder, check)


def judge_step(run: Path, gate: Gate) -> Measured:
    """The step's outcome from its run folder, with the evidence: the folder, the gate's verdict
    and reason, and for a check gate what it judged.

    The step's own build failing (the build stage FAIL, so the gate is blocked by the build) is
    SKIP: those sources and toolchain do not build, and will not on another try. Anything the
    gate did not decide (ERROR, blocked by an earlier gate, not run) is UNDECIDED with the why.
    """
    derived = run_on_disk(RunDir(run))
    evidence: dict[str, Any] = {"run": str(run), "gate": gate.label}
    outcome = derived.stages.get(gate.stage, StageState.NOT_RUN)
    reason = derived.reasons.get(gate.stage, "")
    if isinstance(outcome, Verdict) and gate.check is not None:
        verdict, reason, judged = _check_verdict(run / gate.folder / gate.check / RESULT)
        evidence["judged"] = judged
    else:
        verdict = outcome.value
    evidence.update(verdict=verdict, reason=reason)
    build = derived.stages.get(BUILD_STAGE)
    if gate.stage != BUILD_STAGE and build is Verdict.FAIL:
        evidence.update(verdict=f"{BUILD_STAGE} {Verdict.FAIL.value}", reason=derived.reasons[BUILD_STAGE])
        return Measured(Outcome.SKIP, evidence)
    return Measured(OUTCOMES.get(verdict, Outcome.UNDECIDED), evidence)


def _check_verdict(path: Path) -> tuple[str, str, list[str]]:
    """The check's verdict, reason and judged figures (its stage was derived whole on disk, so
    its result.json agrees with stage.json)."""
    try:
        result = CheckResult.load(path)
    except RunStoreError as exc:
        return StageState.UNREADABLE.value, exc.message, []
    return result.verdict, result.reason, list(result.judged)
