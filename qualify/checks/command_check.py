"""The `command` kind's measure and judge; `qualify.checks.command` declares the kind and
documents what it measures and how it decides."""

from __future__ import annotations

from qualify.checks.base import CANDIDATE, PINNED, Finding, Judgement, SavedCheck
from qualify.checks.commandfacts import CommandFacts, MetricFact
from qualify.checks.commandparams import CommandParams
from qualify.checks.figures import Table
from qualify.checks.findings import headline, worst
from qualify.checks.metrics import Metric, MetricsInvalid, read_metrics
from qualify.checks.rolerun import RoleRun
from qualify.checks.roleruns import measure_command, role_run, run_findings
from qualify.core.context import CheckContext
from qualify.core.verdicts import Verdict


def measure(ctx: CheckContext) -> None:
    run = CommandParams.of(ctx.spec).run
    for role in ctx.roles:
        measure_command(ctx, role, run)


def judge(saved: SavedCheck) -> Judgement:
    findings = run_findings(saved, whole=RoleRun)
    wants_metrics = CommandParams.of_saved(saved).metrics or bool(saved.spec.limits)
    candidate = role_run(saved, "candidate", RoleRun)
    # The candidate's exit status is judged whenever it ran; an error means it never did.
    judged = ["candidate exit status"] if candidate is not None and candidate.error is None else []
    # run_findings holds only failures: with any of them there is nothing sound to compare.
    if not wants_metrics or findings:
        verdict = worst(findings)
        return Judgement(
            verdict,
            headline(verdict, findings, "every role exited 0"),
            tuple(findings),
            judged=tuple(judged),
        )

    metrics: dict[str, dict[str, Metric]] = {}
    for role in saved.roles:
        try:
            metrics[role] = read_metrics(saved.role_dir(role) / "output")
        except MetricsInvalid as exc:
            findings.append(Finding(Verdict.FAIL if role == "candidate" else Verdict.ERROR, str(exc), role))
            continue
        if not metrics[role]:
            findings.append(
                Finding(
                    Verdict.FAIL if role == "candidate" else Verdict.ERROR,
                    "the metrics file lists no metrics: nothing was measured",
                    role,
                )
            )
    if "candidate" in metrics:
        # max_/min_ limits need the candidate alone; a margin needs pinned (the plan ensures it
        # is measured) and is ERROR when pinned's metrics could not be read.
        findings.extend(_judge_limits(saved.spec.limits, metrics.get(PINNED, {}), metrics["candidate"]))
        judged += [f"limit {key}" for key in sorted(saved.spec.limits)]
    verdict = worst(findings)
    tables = (_table(metrics),) if metrics else ()
    facts = CommandFacts(
        metrics={
            role: {name: MetricFact.of(m) for name, m in by_name.items()} for role, by_name in metrics.items()
        }
    )
    return Judgement(
        verdict,
        headline(verdict, findings, f"{len(metrics.get('candidate', {}))} metrics within limits"),
        tuple(findings),
        tables,
        facts if metrics else {},
        judged=tuple(judged),
    )


def _judge_limits(
    limits: dict[str, float], pinned: dict[str, Metric], candidate: dict[str, Metric]
) -> list[Finding]:
    findings: list[Finding] = []
    for key, limit in sorted(limits.items()):
        if key.endswith("_margin"):
            findings.append(_margin(key.removesuffix("_margin"), limit, pinned, candidate))
            continue
        bound, name = key.split("_", 1)
        metric = candidate.get(name)
        if metric is None:
            findings.append(
                Finding(Verdict.FAIL, f"limit {key}: the candidate reported no metric {name!r}", "candidate")
            )
            continue
        crossed = metric.median > limit if bound == "max" else metric.median < limit
        sign = "≤" if bound == "max" else "≥"
        findings.append(
            Finding(
                Verdict.FAIL if crossed else Verdict.PASS,
                f"{name}: candidate median {metric.median:.6g} {metric.unit}, "
                f"limit {key} = {limit:g} ({sign}){' — crossed' if crossed else ''}",
                "candidate",
            )
        )
    return findings


def _margin(name: str, margin: float, pinned: dict[str, Metric], candidate: dict[str, Metric]) -> Finding:
    base, cand = pinned.get(name), candidate.get(name)
    if cand is None:
        return Finding(Verdict.FAIL, f"{name}_margin: the candidate reported no {name!r}", "candidate")
    if base is None:
        return Finding(Verdict.ERROR, f"{name}_margin: the pinned role reported no {name!r}", "pinned")
    # The boundary is the pinned median made worse by the margin (a fraction).
    if cand.higher_is_better:
        boundary = base.median * (1 - margin)
        good = [s >= boundary for s in cand.samples]
    else:
        boundary = base.median * (1 + margin)
        good = [s <= boundary for s in cand.samples]
    text = (
        f"{name}: candidate median {cand.median:.6g} vs pinned {base.median:.6g} {cand.unit}; "
        f"no worse than {boundary:.6g} ({margin:.1%} margin)"
    )
    if all(good):
        return Finding(Verdict.PASS, text, "candidate")
    if not any(good):
        return Finding(Verdict.FAIL, text + " — worse beyond the margin", "candidate")
    return Finding(
        Verdict.INCONCLUSIVE,
        text + f" — {good.count(False)} of {len(good)} samples beyond it: noise exceeds the margin",
        "candidate",
    )


def _table(metrics: dict[str, dict[str, Metric]]) -> Table:
    names = sorted({name for per_role in metrics.values() for name in per_role})
    rows = []
    for name in names:
        base = metrics.get(PINNED, {}).get(name)
        cand = metrics.get(CANDIDATE, {}).get(name)
        delta = f"{(cand.median / base.median - 1):+.2%}" if base and cand and base.median else "—"
        shown = cand or base
        unit = shown.unit if shown else ""
        rows.append(
            (
                name,
                unit,
                f"{base.median:.6g}" if base else "—",
                f"{cand.median:.6g}" if cand else "—",
                delta,
                f"{min(cand.samples):.6g}–{max(cand.samples):.6g}" if cand else "—",
                len(cand.samples) if cand else 0,
            )
        )
    return Table(
        title="Metrics (medians)",
        columns=("metric", "unit", "pinned", "candidate", "Δ", "candidate range", "samples"),
        rows=tuple(rows),
    )
