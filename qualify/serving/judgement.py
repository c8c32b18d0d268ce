"""The `openai-suite` kind's judgement: a pure function of the saved check folder and the limits.

`SavedServing.load` reads what `measure` left (each role's measurement and cases, the timing
records); `assess` decides from that alone and returns the verdict, the findings, what was
judged and the evidence the tables present (`qualify.serving.tables`). Nothing here formats a
table, so a judgement can be tested, and re-judged with new limits, apart from its report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from qualify.checks.base import CANDIDATE, PINNED, Finding, SavedCheck
from qualify.checks.findings import reason_line, worst
from qualify.core.verdicts import Verdict
from qualify.records.serving import (
    GateRow,
    GreedyFact,
    ServingCase,
    ServingCases,
    ServingFacts,
    ServingMeasurement,
    ServingTiming,
    TimingFacts,
)
from qualify.serving.compare import CaseRow, compare_cases
from qualify.serving.params import ServingParams
from qualify.serving.timing import judge_timing

CASES = "cases.json"
TIMING = "timing.json"
PAIRED = ("pinned", "candidate")


@dataclass(frozen=True)
class SavedServing:
    """What the judgement reads from a check folder."""

    roles: tuple[str, ...]
    #: Each role's measurement.json, for the roles that saved one.
    measured: dict[str, ServingMeasurement]
    #: Each role's serving cases (none when its cases.json is missing).
    cases: dict[str, list[ServingCase]]
    #: `timing.json`: the ABBA pairs per request type, the warm-up and every request's record.
    timing: ServingTiming | None
    #: The family-wise level of the timing gate.
    alpha: float
    #: Whether the plan asked for timing at all.
    timing_asked: bool

    @classmethod
    def load(cls, saved: SavedCheck) -> SavedServing:
        measured = {r: m for r in saved.roles if (m := saved.measured(r, ServingMeasurement)) is not None}
        cases = {}
        for role in saved.roles:
            path = saved.role_dir(role) / CASES
            cases[role] = ServingCases.read(path).cases if path.is_file() else []
        path = saved.folder / TIMING
        timing = ServingTiming.read(path) if path.is_file() else None
        params = ServingParams.of_saved(saved)
        return cls(
            roles=saved.roles,
            measured=measured,
            cases=cases,
            timing=timing,
            alpha=float(params.alpha),
            timing_asked=bool(params.timing),
        )


@dataclass(frozen=True)
class ServingJudgement:
    """The verdict and why, what was judged, and the evidence the report's tables show."""

    verdict: Verdict
    reason: str
    findings: tuple[Finding, ...]
    judged: tuple[str, ...]
    facts: ServingFacts
    limits: Mapping[str, float]
    #: One row per serving case compared across roles.
    rows: tuple[CaseRow, ...]
    #: The first greedy divergence per prompt.
    greedy: tuple[GreedyFact, ...]
    #: The timing gate's rows (none when no timing was saved).
    gate: tuple[GateRow, ...] = ()
    timing: ServingTiming | None = None
    measured: dict[str, ServingMeasurement] = field(default_factory=dict)


def assess(data: SavedServing, limits: Mapping[str, float]) -> ServingJudgement:
    """Judge the saved serving cases and timing records against `limits` (defaults filled in)."""
    findings = role_findings(data)
    by_role = data.cases
    for role in PAIRED:
        if role in data.measured and not by_role.get(role) and data.measured[role].error is None:
            findings.append(
                Finding(
                    Verdict.FAIL if role == "candidate" else Verdict.ERROR,
                    "no serving case ran: nothing was measured",
                    role,
                )
            )
    case_findings, rows, greedy = compare_cases(by_role, limits["tie_margin"])
    findings.extend(case_findings)
    counted = {r: len(c) for r, c in by_role.items()}
    timing_facts: TimingFacts | None = None
    judged = []
    if by_role.get(CANDIDATE):
        judged.append(f"{len(by_role['candidate'])} candidate cases checked")
    if by_role.get(CANDIDATE) and by_role.get(PINNED):
        judged.append(f"{len(rows)} cases compared with pinned")
    gate: list[GateRow] = []
    if data.timing is not None:
        timing = data.timing
        gate = judge_timing(
            timing.records, timing.types, data.alpha, limits["max_slowdown_pct"], limits["max_slowdown_ms"]
        )
        findings.extend(timing_findings(timing, gate))
        timing_facts = TimingFacts(pairs=timing.pairs, rows=gate)
        judged += [f"timing {r.type} {r.metric}" for r in gate if r.result in ("PASS", "FAIL")]
    elif all(r in data.measured for r in PAIRED) and data.timing_asked:
        findings.append(Finding(Verdict.WARN, "timing gate not run (a server was not up for it)", None))
    # Without timing records the facts hold no `timing` key at all (not a null one).
    facts = (
        ServingFacts(cases=counted, greedy=greedy)
        if timing_facts is None
        else ServingFacts(cases=counted, greedy=greedy, timing=timing_facts)
    )
    verdict = worst(findings)
    counts = {r: f"{sum(not c.problems for c in cs)}/{len(cs)} cases pass" for r, cs in by_role.items() if cs}
    summary = "; ".join(f"{r} {t}" for r, t in counts.items())
    reason = reason_line(verdict, findings, summary)
    return ServingJudgement(
        verdict,
        reason,
        tuple(findings),
        tuple(judged),
        facts,
        limits,
        tuple(rows),
        tuple(greedy),
        tuple(gate),
        data.timing,
        data.measured,
    )


def role_findings(data: SavedServing) -> list[Finding]:
    """What stopped a role before or while its suites ran: not measured, a template it could not
    fill, a server that did not start or died."""
    findings: list[Finding] = []
    for role in data.roles:
        m = data.measured.get(role)
        baseline = Verdict.FAIL if role == "candidate" else Verdict.ERROR
        if m is None:
            findings.append(Finding(Verdict.ERROR, "not measured (the run stopped first)", role))
        elif m.error is not None:
            hint = m.error.hint
            findings.append(Finding(Verdict.ERROR, m.error.message + (f" ({hint})" if hint else ""), role))
        elif m.start_error is not None:
            error = m.start_error
            tail = "\n".join(error.log_tail[-8:])
            verdict = Verdict.ERROR if error.missing else baseline
            findings.append(Finding(verdict, f"server did not start: {error.message}\n{tail}".rstrip(), role))
        elif m.died is not None:
            died = m.died
            tail = "\n".join(died.log_tail[-8:])
            not_run = ", ".join(m.not_run)
            findings.append(
                Finding(
                    baseline,
                    f"server died in suite {died.suite} (not run: {not_run})\n{tail}".rstrip(),
                    role,
                )
            )
    return findings


def timing_findings(timing: ServingTiming, gate: list[GateRow]) -> list[Finding]:
    """The first failed timing requests, then each gate row beyond its bound."""
    findings: list[Finding] = []
    failed = [r for r in timing.records if not r.ok]
    for record in failed[:5]:
        verdict = Verdict.FAIL if record.role == "candidate" else Verdict.ERROR
        findings.append(Finding(verdict, f"timing {record.type} request failed: {record.error}", record.role))
    for row in gate:
        if row.result == "FAIL":
            findings.append(
                Finding(
                    Verdict.FAIL,
                    f"timing {row.type} {row.metric}: median "
                    f"{row.candidate_median:.1f} vs {row.pinned_median:.1f} ms exceeds the bound "
                    f"{row.bound:.1f} ms (one-sided p {row.p_value:.4f} ≤ {row.level:.4f})",
                    "candidate",
                )
            )
        elif row.result == "INCONCLUSIVE":
            why = (
                "no complete pairs"
                if not row.pairs
                else f"median over the bound, not significant (p {row.p_value:.4f} > {row.level:.4f})"
            )
            findings.append(
                Finding(Verdict.INCONCLUSIVE, f"timing {row.type} {row.metric}: {why}", "candidate")
            )
    return findings
