"""A remedy's answer as its document (`qualify.checks.remedyreport.RemedyReport`): per variant,
the totals and each source file's outcome, as `qualify.remedy.judge` judged them."""

from __future__ import annotations

from qualify.checks.remedyreport import Failing, Outcome, RemedyReport, Totals, VariantReport
from qualify.remedy.drive import Remedy
from qualify.remedy.judge import SourceOutcome


def totals(outcomes: list[SourceOutcome]) -> Totals:
    before = [o.code_bytes_before for o in outcomes]
    after = [o.code_bytes_after for o in outcomes]
    code_before = sum(b for b in before if b is not None)
    code_after = sum(a for a in after if a is not None)
    known = bool(outcomes) and None not in before and None not in after and code_before > 0
    return Totals(
        sources=len(outcomes),
        failing_before=sum(o.failing_before for o in outcomes),
        recovered=sum(o.recovered for o in outcomes),
        newly_broken=sum(o.newly_broken for o in outcomes),
        sources_fully_recovered=sum(o.failing_before > 0 and o.still_failing == 0 for o in outcomes),
        code_change_pct=round(100.0 * (code_after - code_before) / code_before, 2) if known else None,
    )


def document(remedy: Remedy) -> RemedyReport:
    failing = sum(len(f.failing) for f in remedy.failing)
    variants = {
        name: VariantReport(
            installable=remedy.variants[name].installable,
            flags=remedy.variants[name].flags,
            build_seconds=remedy.seconds.get(name),
            totals=totals(outcomes),
            sources=[Outcome.model_validate(o.as_json()) for o in outcomes],
            not_built=remedy.problems[name],
        )
        for name, outcomes in remedy.outcomes.items()
    }
    said = [
        f"{name} brings back {v.totals.recovered} of {v.totals.failing_before} and breaks "
        f"{v.totals.newly_broken}"
        for name, v in variants.items()
    ]
    files = f"{failing} failing kernels in {len(remedy.failing)} source files"
    return RemedyReport(
        run=remedy.check.run.name,
        check=remedy.check.label,
        headline="; ".join([files, *said]) if said else f"{files}; no variant tried",
        failing=[
            Failing(source_file=f.source_file, kernels=f.kernels, failing=list(f.failing))
            for f in remedy.failing
        ],
        variants=variants,
    )
