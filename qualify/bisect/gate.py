"""The gate a bisect watches, `STAGE`, `STAGE/CHECK` or `STAGE/CHECK/METRIC`, and what one
step's run folder says of it: the step's outcome and its evidence, read from the files as
derived on disk (`qualify.pipeline.ondisk`), never from the verdict run.json saved."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.bisect.kernelchanges import KIND as KERNELS
from qualify.bisect.kernelchanges import kernel_figure
from qualify.bisect.metricgate import gate_metrics, judge_metric
from qualify.bisect.outcomes import Measured
from qualify.core.errors import RunStoreError, UsageError
from qualify.core.runstore import RunDir
from qualify.core.tomlfile import suggest
from qualify.core.verdicts import StageState, Verdict
from qualify.pipeline.notapplicable import BUILD_STAGE
from qualify.pipeline.ondisk import RESULT, run_on_disk
from qualify.pipeline.plan import Plan
from qualify.records.bisect import Outcome, StepEvidence
from qualify.records.result import CheckResult

#: A gate's verdict and what the step it judged is, for the search.
OUTCOMES: dict[str, Outcome] = {
    Verdict.PASS.value: Outcome.GOOD,
    Verdict.WARN.value: Outcome.GOOD,
    Verdict.FAIL.value: Outcome.BAD,
    Verdict.INCONCLUSIVE.value: Outcome.UNDECIDED,
}


@dataclass(frozen=True)
class Gate:
    """A stage's verdict, one check's of it, or one metric's of a check."""

    stage: str
    folder: str
    check: str | None = None
    metric: str | None = None

    @property
    def label(self) -> str:
        return "/".join(p for p in (self.stage, self.check, self.metric) if p is not None)


def parse_gate(text: str, plan: Plan) -> Gate:
    """`STAGE`, `STAGE/CHECK` or `STAGE/CHECK/METRIC`, each a name of the plan (refused with the
    closest name); a metric must be one the check's limits judge."""
    name, _, rest = text.partition("/")
    check, _, metric = rest.partition("/")
    stage = plan.stage(name)  # a UsageError naming the closest stage
    if not check:
        return Gate(stage.name, stage.folder)
    checks = [c.name for c in stage.checks]
    if check not in checks:
        raise UsageError(
            f"--gate {text}: the stage {stage.name!r} has no check {check!r}{suggest(check, checks)}",
            f"checks of {stage.name}: " + ", ".join(checks),
        )
    if not metric:
        return Gate(stage.name, stage.folder, check)
    spec = next(c for c in stage.checks if c.name == check)
    # The command kind judges metrics one by one, each against a limit the plan names; the kld
    # kind each of its limits and non-inferiority.
    metrics = gate_metrics(spec)
    if not metrics:
        raise UsageError(
            f"--gate {text}: the check {stage.name}/{check} ({spec.kind}) judges no metric by a limit",
            f"gate on {stage.name}/{check}, or give the command check limits "
            "(max_<metric>, min_<metric>, <metric>_margin) in its stage file",
        )
    if metric not in metrics:
        raise UsageError(
            f"--gate {text}: the check {stage.name}/{check} has no limit on a metric {metric!r}"
            f"{suggest(metric, metrics)}",
            f"metrics its limits judge: {', '.join(metrics)}",
        )
    return Gate(stage.name, stage.folder, check, metric)


def judge_step(run: Path, gate: Gate) -> Measured:
    """The step's outcome from its run folder, with the evidence: the folder, the gate's verdict
    and reason, for a check gate what it judged, and for a metric gate its figure (the
    candidate's and pinned's medians) or a kernel-resources gate's counts (kernels spilling,
    losing occupancy, failing).

    The step's own build failing (the build stage FAIL, so the gate is blocked by the build) is
    SKIP: those sources and toolchain do not build, and will not on another try. Anything the
    gate did not decide (ERROR, blocked by an earlier gate, not run) is UNDECIDED with the why.
    """
    derived = run_on_disk(RunDir(run))
    outcome = derived.stages.get(gate.stage, StageState.NOT_RUN)
    reason = derived.reasons.get(gate.stage, "")
    decided: Outcome | None = None
    checked: dict[str, Any] = {}  # what a check gate adds: what it judged, its folder, its figure
    if isinstance(outcome, Verdict) and gate.check is not None:
        result = _check_result(run / gate.folder / gate.check / RESULT)
        if isinstance(result, str):
            verdict, reason = StageState.UNREADABLE.value, result
        else:
            verdict, reason = result.verdict, result.reason
            checked = {"judged": list(result.judged), "check_dir": str(run / gate.folder / gate.check)}
            if result.kind == KERNELS:
                checked["figure"] = kernel_figure(run / gate.folder / gate.check, result.evidence)
            if gate.metric is not None:
                said = judge_metric(gate.metric, result)
                decided, verdict, reason = said.outcome, said.verdict, said.reason
                checked["figure"] = said.figure()
    else:
        verdict = outcome.value
    build = derived.stages.get(BUILD_STAGE)
    if gate.stage != BUILD_STAGE and build is Verdict.FAIL:
        said_build = f"{BUILD_STAGE} {Verdict.FAIL.value}"
        evidence = StepEvidence(
            run=str(run), gate=gate.label, verdict=said_build, reason=derived.reasons[BUILD_STAGE], **checked
        )
        return Measured(Outcome.SKIP, evidence)
    if decided is None:
        decided = OUTCOMES.get(verdict, Outcome.UNDECIDED)
    return Measured(
        decided, StepEvidence(run=str(run), gate=gate.label, verdict=verdict, reason=reason, **checked)
    )


def _check_result(path: Path) -> CheckResult | str:
    """The check's saved result (its stage was derived whole on disk, so its result.json agrees
    with stage.json), or why it does not read."""
    try:
        return CheckResult.load(path)
    except RunStoreError as exc:
        return exc.message
