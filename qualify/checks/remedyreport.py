"""What `qualify remedy` says, as readers above the stages read it: the typed document it writes
beside a run (remedy-report.json, `RemedyReport`), the Markdown of it, and where it is
(`folder_of`). The run's own report shows it (`remedy_beside`); every value of it is escaped where
it is shown, since it is a file of the runs folder, not part of the run's seal."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from qualify.checks.evidence import Evidence, Part
from qualify.core.errors import QualifyError
from qualify.core.markdown import code, escape

#: The remedy's answer, and its Markdown, in its folder.
REPORT = "remedy-report.json"
SUMMARY = "summary.md"

#: Source files listed one by one in the Markdown before the rest are counted.
LISTED = 40
NOTE = (
    "Static evidence read from code objects: nothing ran on a GPU. A kernel is back when it no "
    "longer fails against pinned by the compile check's own rules and limits."
)


class Failing(Part):
    source_file: str
    kernels: int
    failing: list[str]


class Outcome(Part):
    """One source file rebuilt by one variant (`qualify.remedy.judge.SourceOutcome`)."""

    source_file: str
    kernels: int
    failing_before: int
    recovered: int
    still_failing: int
    newly_broken: int
    warn_before: int
    warn_after: int
    code_bytes_before: int | None
    code_bytes_after: int | None
    code_change_pct: float | None
    missing: int
    extra: int
    recovered_kernels: list[str]
    newly_broken_kernels: list[str]


class Totals(Part):
    sources: int
    failing_before: int
    recovered: int
    newly_broken: int
    sources_fully_recovered: int
    code_change_pct: float | None


class VariantReport(Part):
    installable: str
    flags: str
    build_seconds: float | None
    totals: Totals
    sources: list[Outcome]
    not_built: dict[str, str] = Field(description="source file: why its unit was not built or read")


class RemedyReport(Evidence):
    """remedy-report.json."""

    run: str
    check: str
    headline: str
    failing: list[Failing]
    variants: dict[str, VariantReport]

    def outcome(self, variant: str, source_file: str) -> Outcome | None:
        """What `variant` did to `source_file`, if it rebuilt it."""
        return next((o for o in self.variants[variant].sources if o.source_file == source_file), None)


def cell(outcome: Outcome | None, problem: str | None = None) -> str:
    if outcome is None:
        return "not built" if problem else ""
    said = f"{outcome.recovered} of {outcome.failing_before} back"
    if outcome.newly_broken:
        said += f", {outcome.newly_broken} broken"
    if outcome.code_change_pct is not None:
        said += f", code {outcome.code_change_pct:+.1f} %"
    if outcome.missing or outcome.extra:
        said += f" (unit differs: {outcome.missing} missing, {outcome.extra} extra)"
    return said


def markdown(report: RemedyReport, heading: str = "##", listed: int = LISTED) -> str:
    """The remedy as Markdown: every value from the document escaped (it is read back from a
    file in the runs folder)."""
    names = list(report.variants)
    lines = [
        f"{heading} Remedies for {escape(report.check)} of run {escape(report.run)}",
        "",
        escape(report.headline) + ".",
        "",
        NOTE,
        "",
        "| variant | flags | brings back | breaks | code | unit builds |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        v = report.variants[name]
        t = v.totals
        size = "" if t.code_change_pct is None else f"{t.code_change_pct:+.1f} %"
        seconds = "" if v.build_seconds is None else f"{v.build_seconds:.0f} s"
        lines.append(
            f"| {escape(name)} | {code(v.flags) or '—'} | {t.recovered} of {t.failing_before} | "
            f"{t.newly_broken} | {size} | {seconds} |"
        )
    lines += ["", "| source file | failing | " + " | ".join(escape(n) for n in names) + " |"]
    lines.append("|---|---|" + "---|" * len(names))
    for failing in report.failing[:listed]:
        file = failing.source_file
        cells = [cell(report.outcome(n, file), report.variants[n].not_built.get(file)) for n in names]
        lines.append(
            f"| {escape(file)} | {len(failing.failing)} of {failing.kernels} | " + " | ".join(cells) + " |"
        )
    if len(report.failing) > listed:
        lines.append(f"\n{len(report.failing) - listed} more source files in remedy-report.json.")
    broken = [(n, o) for n in names for o in report.variants[n].sources if o.newly_broken_kernels]
    if broken:
        lines += ["", "Newly broken:"]
        for name, outcome in broken[:listed]:
            shown = ", ".join(code(k) for k in outcome.newly_broken_kernels[:5])
            more = len(outcome.newly_broken_kernels) - 5
            rest = f" and {more} more" if more > 0 else ""
            lines.append(f"- {escape(name)}, {escape(outcome.source_file)}: {shown}{rest}")
    unbuilt = [(n, f, why) for n in names for f, why in report.variants[n].not_built.items()]
    if unbuilt:
        lines += ["", "Not built:"]
        lines += [f"- {escape(n)}, {escape(f)}: {escape(why)}" for n, f, why in unbuilt[:listed]]
    return "\n".join(lines) + "\n"


def folder_of(run: Path) -> Path:
    """Where `qualify remedy` keeps the remedy of the run in `run`: beside it, in the runs folder."""
    return run.parent / f"remedy-{run.name}"


def remedy_beside(run: Path) -> RemedyReport | str | None:
    """The remedy of the run, why it does not read, or None where there is none."""
    path = folder_of(run) / REPORT
    if not path.is_file():
        return None
    try:
        report = RemedyReport.read(path)
    except QualifyError as exc:
        return f"{path} does not read: {exc.message}"
    if report.run != run.name:
        return f"{path} is the remedy of run {report.run}, not of {run.name}"
    return report
