"""A metric gate, `STAGE/CHECK/METRIC`: one metric of a `command` check (`metrics = true`)
against the plan's limits for it, or one limit of a `kld` check (`mean_kld`, …, and
`noninferiority`), read back from the check's saved result.

Nothing is judged again here: the `command` kind's judge (`qualify.checks.command_check`)
already saved a finding per limit, each message led by the metric's name (`NAME: …`, or
`NAME_margin: …` / `limit max_NAME: …` when the metric was missing), and its facts
(`CommandFacts`) hold each role's median. A step's outcome is those findings' worst verdict
for that metric; the figure is the roles' medians of it. A `kld` check's are read from its
facts (`KldFacts`) the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qualify.checks.commandfacts import CommandFacts
from qualify.core.checkspec import CheckSpec
from qualify.core.verdicts import Verdict
from qualify.numerics.kind import KIND as KLD_KIND
from qualify.numerics.limitmetrics import judged_metric, metric_names
from qualify.records.bisect import MetricFigure, Outcome
from qualify.records.numerics import KldFacts
from qualify.records.result import CheckResult, SavedFinding

#: The kind whose limits are metrics too (`qualify.numerics.limitmetrics`).
KLD = KLD_KIND.name

#: Worst first: the first verdict of these any finding of the metric holds is the metric's.
_ORDER = (Verdict.ERROR, Verdict.INCONCLUSIVE, Verdict.FAIL, Verdict.WARN, Verdict.PASS)
_OUTCOMES = {
    Verdict.PASS: Outcome.GOOD,
    Verdict.WARN: Outcome.GOOD,
    Verdict.FAIL: Outcome.BAD,
}


def limited_metrics(spec: CheckSpec) -> list[str]:
    """The metrics the check's limits name (`max_X`, `min_X`, `X_margin`), in the plan's order."""
    names = []
    for key in spec.limits:
        if key.endswith("_margin"):
            names.append(key.removesuffix("_margin"))
        elif key.startswith(("max_", "min_")):
            names.append(key[4:])
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class MetricJudged:
    """What a step's saved result says of one metric: its outcome, a verdict word and why, and
    the medians (None where the role reported none)."""

    outcome: Outcome
    verdict: str
    reason: str
    candidate: float | None
    pinned: float | None

    def figure(self) -> MetricFigure:
        return MetricFigure(candidate=self.candidate, pinned=self.pinned)


def gate_metrics(spec: CheckSpec) -> list[str]:
    """The metrics a gate may watch on this check: a `command` check's limited metrics, a `kld`
    check's limits and non-inferiority (`qualify.numerics.limitmetrics`); none for other kinds."""
    if spec.kind == "command":
        return limited_metrics(spec)
    if spec.kind == KLD:
        return metric_names(spec.limits)
    return []


def judge_metric(metric: str, result: CheckResult) -> MetricJudged:
    """The metric's outcome from the check's saved result, by its kind."""
    if result.kind == KLD:
        return _kld_metric(metric, result)
    facts = result.evidence if isinstance(result.evidence, CommandFacts) else None
    return command_metric(metric, result.findings, facts, result.reason)


def _kld_metric(metric: str, result: CheckResult) -> MetricJudged:
    """A `kld` check's limit or non-inferiority, as its judge decided it on the saved bounds; a
    check that reached no bound (its run failed, too few chunks) is NOT JUDGED."""
    limits = result.spec.limits if result.spec is not None else {}
    facts = result.evidence if isinstance(result.evidence, KldFacts) else None
    said = judged_metric(metric, facts, limits)
    if said is None:
        reason = f"no limit of {metric!r} was judged: {result.reason}"
        return MetricJudged(Outcome.UNDECIDED, "NOT JUDGED", reason, None, None)
    verdict = next((v for v in _ORDER if v.value == said.verdict), None)
    outcome = _OUTCOMES.get(verdict, Outcome.UNDECIDED) if verdict is not None else Outcome.UNDECIDED
    return MetricJudged(outcome, said.verdict, said.reason, said.candidate, said.pinned)


def command_metric(
    metric: str,
    findings: Sequence[SavedFinding],
    facts: CommandFacts | None,
    check_reason: str,
) -> MetricJudged:
    """A `command` check's metric from its saved findings and its facts (None when its judge
    read no role's metrics: it saved none).

    A metric the candidate did not report is UNDECIDED, the reason kept: a missing figure is
    neither within nor beyond a limit. So is a metric no finding names (the check never
    reached its limits: the command failed, the metrics file did not read), with the check's
    own reason.
    """
    pinned, candidate = (_median(facts, role, metric) for role in ("pinned", "candidate"))
    mine = [f for f in findings if _names(f.message, metric)]
    if candidate is None:
        said = next((f.message for f in mine), f"the candidate reported no metric {metric!r}")
        return MetricJudged(Outcome.UNDECIDED, "MISSING", f"{said} ({check_reason})", None, pinned)
    if not mine:
        reason = f"no limit of {metric!r} was judged: {check_reason}"
        return MetricJudged(Outcome.UNDECIDED, "NOT JUDGED", reason, candidate, pinned)
    verdicts = {f.verdict for f in mine}
    worst = next(v for v in (*_ORDER, None) if v is None or v.value in verdicts)
    if worst is None:  # a verdict word the judge does not give: not to be guessed at
        return MetricJudged(Outcome.UNDECIDED, "/".join(sorted(verdicts)), mine[0].message, candidate, pinned)
    said = "; ".join(f.message for f in mine if f.verdict == worst.value)
    return MetricJudged(_OUTCOMES.get(worst, Outcome.UNDECIDED), worst.value, said, candidate, pinned)


def _names(message: str, metric: str) -> bool:
    # Each per-limit finding of the command kind leads with the metric or the limit's key.
    return message.startswith(
        (f"{metric}: ", f"{metric}_margin: ", f"limit max_{metric}: ", f"limit min_{metric}: ")
    )


def _median(facts: CommandFacts | None, role: str, metric: str) -> float | None:
    """The median the role's metric was judged on, None where the role reported no such metric."""
    said = None if facts is None else facts.metrics.get(role, {}).get(metric)
    return None if said is None else said.median
