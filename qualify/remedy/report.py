"""What a remedy says: per source file, what each variant brought back, broke and cost; in
Markdown for the pull request and as a JSON document."""

from __future__ import annotations

from typing import Any

from qualify.core.markdown import code, escape
from qualify.remedy.drive import Remedy
from qualify.remedy.judge import SourceOutcome

#: Source files listed one by one in the Markdown before the rest are counted.
LISTED = 40
_NOTE = (
    "Static evidence read from code objects: nothing ran on a GPU. A kernel is recovered when it no "
    "longer fails against pinned by the compile check's own rules and limits."
)


def cell(outcome: SourceOutcome | None, problem: str | None = None) -> str:
    if outcome is None:
        return "not built" if problem else ""
    said = f"{outcome.recovered} of {outcome.failing_before} back"
    if outcome.newly_broken:
        said += f", {outcome.newly_broken} broken"
    change = outcome.code_change_pct
    if change is not None:
        said += f", code {change:+.1f} %"
    if outcome.missing or outcome.extra:
        said += f" (unit differs: {outcome.missing} missing, {outcome.extra} extra)"
    return said


def totals(outcomes: list[SourceOutcome]) -> dict[str, Any]:
    before = [o.code_bytes_before for o in outcomes]
    after = [o.code_bytes_after for o in outcomes]
    known = all(b is not None for b in before) and all(a is not None for a in after) and outcomes
    code_before = sum(b for b in before if b is not None)
    code_after = sum(a for a in after if a is not None)
    return {
        "sources": len(outcomes),
        "failing_before": sum(o.failing_before for o in outcomes),
        "recovered": sum(o.recovered for o in outcomes),
        "newly_broken": sum(o.newly_broken for o in outcomes),
        "sources_fully_recovered": sum(o.failing_before > 0 and o.still_failing == 0 for o in outcomes),
        "code_change_pct": round(100.0 * (code_after - code_before) / code_before, 2)
        if known and code_before
        else None,
    }


def headline(remedy: Remedy) -> str:
    failing = sum(len(f.failing) for f in remedy.failing)
    parts = []
    for name, outcomes in remedy.outcomes.items():
        t = totals(outcomes)
        part = f"{name} brings back {t['recovered']} of {t['failing_before']} and breaks {t['newly_broken']}"
        parts.append(part)
    return (
        f"{failing} failing kernels in {len(remedy.failing)} source files; " + "; ".join(parts)
        if parts
        else f"{failing} failing kernels in {len(remedy.failing)} source files; no variant tried"
    )


def markdown(remedy: Remedy) -> str:
    names = list(remedy.outcomes)
    lines = [
        f"## Remedies for {escape(remedy.check.label)} of run {escape(remedy.check.run.name)}",
        "",
        escape(headline(remedy)) + ".",
        "",
        _NOTE,
        "",
        "| variant | flags | brings back | breaks | code | unit builds |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        t = totals(remedy.outcomes[name])
        size = "" if t["code_change_pct"] is None else f"{t['code_change_pct']:+.1f} %"
        lines.append(
            f"| {escape(name)} | {code(remedy.variants[name].flags) or '—'} | {t['recovered']} of "
            f"{t['failing_before']} | {t['newly_broken']} | {size} | {remedy.seconds.get(name, 0):.0f} s |"
        )
    lines += ["", "| source file | failing | " + " | ".join(escape(n) for n in names) + " |"]
    lines.append("|---|---|" + "---|" * len(names))
    by_variant = {n: {o.source_file: o for o in remedy.outcomes[n]} for n in names}
    for failing in remedy.failing[:LISTED]:
        file = failing.source_file
        cells = [cell(by_variant[n].get(file), remedy.problems[n].get(file)) for n in names]
        lines.append(
            f"| {escape(file)} | {len(failing.failing)} of {failing.kernels} | " + " | ".join(cells) + " |"
        )
    if len(remedy.failing) > LISTED:
        lines.append(f"\n{len(remedy.failing) - LISTED} more source files in remedy-report.json.")
    broken = [(n, o) for n in names for o in remedy.outcomes[n] if o.newly_broken_keys]
    if broken:
        lines += ["", "Newly broken:"]
        for name, outcome in broken[:LISTED]:
            shown = ", ".join(code(k) for k in outcome.newly_broken_keys[:5])
            more = len(outcome.newly_broken_keys) - 5
            rest = f" and {more} more" if more > 0 else ""
            lines.append(f"- {escape(name)}, {escape(outcome.source_file)}: {shown}{rest}")
    unbuilt = [(n, f, why) for n in names for f, why in remedy.problems[n].items()]
    if unbuilt:
        lines += ["", "Not built:"]
        lines += [f"- {escape(n)}, {escape(f)}: {escape(why)}" for n, f, why in unbuilt[:LISTED]]
    return "\n".join(lines) + "\n"


def document(remedy: Remedy) -> dict[str, Any]:
    return {
        "run": remedy.check.run.name,
        "check": remedy.check.label,
        "headline": headline(remedy),
        "failing": [
            {"source_file": f.source_file, "kernels": f.kernels, "failing": list(f.failing)}
            for f in remedy.failing
        ],
        "variants": {
            name: {
                "installable": remedy.variants[name].installable,
                "flags": remedy.variants[name].flags,
                "build_seconds": remedy.seconds.get(name),
                "totals": totals(outcomes),
                "sources": [o.as_json() for o in outcomes],
                "not_built": remedy.problems[name],
            }
            for name, outcomes in remedy.outcomes.items()
        },
    }
