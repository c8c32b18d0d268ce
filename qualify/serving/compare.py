"""The serving cases of two roles side by side: per-role passes, strict equality, and greedy
faithfulness up to the first near-tie.

Greedy faithfulness: the generated token ids of pinned and candidate are compared position by
position. At the first position where they differ, the pinned role's top-1 minus top-2
log-prob margin decides: below `tie_margin` (nats) it is a near-tie, where any build may
legitimately pick the other token, and the text-dependent values of the case are no longer
compared (only its structural checks are); at or above it the candidate decoded differently
where the pinned role was sure, which is a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qualify.checks.base import CANDIDATE, PINNED, Finding
from qualify.core.verdicts import Verdict
from qualify.records.serving import GreedyFact, GreedyRun, ServingCase


@dataclass(frozen=True)
class Divergence:
    """Where two greedy runs first differ (`position` None: identical)."""

    compared: int
    position: int | None
    margin: float | None
    tie: bool

    def describe(self) -> str:
        if self.position is None:
            return f"identical ({self.compared} tokens)"
        margin = "no log-probs" if self.margin is None else f"pinned top-2 margin {self.margin:.3f}"
        kind = "near-tie" if self.tie else "not a tie"
        return f"differs at token {self.position} ({margin}: {kind})"


def first_divergence(pinned: GreedyRun, candidate: GreedyRun, tie_margin: float) -> Divergence:
    a, b, margins = pinned.tokens, candidate.tokens, pinned.margins
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            margin = margins[index] if index < len(margins) else None
            return Divergence(index, index, margin, margin is not None and margin < tie_margin)
    if len(a) != len(b):
        # One stopped earlier: the stop token itself was the first difference (not in the list).
        index = min(len(a), len(b))
        margin = margins[index] if index < len(margins) else None
        return Divergence(index, index, margin, margin is not None and margin < tie_margin)
    return Divergence(len(a), None, None, False)


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    keys = sorted(set(a) | set(b))
    return [f"{k}: {_show(a.get(k))} → {_show(b.get(k))}" for k in keys if a.get(k) != b.get(k)]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True)
class CaseRow:
    suite: str
    case: str
    pinned: str
    candidate: str
    across: str
    first_difference: str


def compare_cases(
    by_role: dict[str, list[ServingCase]], tie_margin: float
) -> tuple[list[Finding], list[CaseRow], list[GreedyFact]]:
    """Findings, table rows and greedy facts for the cases both roles saved."""
    pinned = {c.case: c for c in by_role.get(PINNED, [])}
    candidate = {c.case: c for c in by_role.get(CANDIDATE, [])}
    findings: list[Finding] = []
    rows: list[CaseRow] = []
    greedy_facts: list[GreedyFact] = []
    divergences: dict[str, Divergence] = {}
    for name, case in pinned.items():
        other = candidate.get(name)
        if other is not None and case.greedy is not None and other.greedy is not None:
            divergences[name] = first_divergence(case.greedy, other.greedy, tie_margin)
    for name in list(pinned) + [n for n in candidate if n not in pinned]:
        p, c = pinned.get(name), candidate.get(name)
        suite = p.suite if p is not None else c.suite if c is not None else ""
        status = {role: _status(case) for role, case in (("pinned", p), ("candidate", c))}
        if p is None or c is None:
            if c is None and candidate:
                # The candidate ran its suites but not this case: a case lost is a failure.
                findings.append(
                    Finding(Verdict.FAIL, f"{suite}/{name}: ran in pinned, not in the candidate", "candidate")
                )
            elif c is not None and c.problems:
                # Nothing to compare with: the candidate's own failing case still fails.
                findings.append(
                    Finding(Verdict.FAIL, f"{suite}/{name}: {'; '.join(c.problems[:3])}", "candidate")
                )
            rows.append(CaseRow(suite, name, status["pinned"], status["candidate"], "one role only", ""))
            continue
        if c.problems and not p.problems:
            findings.append(
                Finding(Verdict.FAIL, f"{suite}/{name}: {'; '.join(c.problems[:3])}", "candidate")
            )
        elif c.problems:
            findings.append(
                Finding(Verdict.WARN, f"{suite}/{name} fails in both roles: {c.problems[0]}", None)
            )
        elif p.problems:
            findings.append(Finding(Verdict.WARN, f"{suite}/{name}: {p.problems[0]}", "pinned"))
        if p.problems or c.problems:
            # A case that failed in a role has nothing trustworthy to compare across roles.
            rows.append(CaseRow(suite, name, status["pinned"], status["candidate"], "not compared", ""))
            continue
        strict = _differences(p.strict, c.strict)
        for diff in strict:
            findings.append(
                Finding(Verdict.FAIL, f"{suite}/{name}: differs across roles: {diff}", "candidate")
            )
        ref = name if name in divergences else p.greedy_ref
        divergence = divergences.get(ref) if ref else None
        text_diff = _differences(p.text, c.text)
        across, first = "equal", ""
        if strict:
            across, first = "differs", strict[0]
        if divergence is not None and divergence.position is not None:
            first = first or divergence.describe()
            if divergence.tie:
                across = across if strict else "equal up to a near-tie"
            elif ref == name:
                across = "differs"
                findings.append(
                    Finding(
                        Verdict.FAIL, f"{suite}/{name}: greedy tokens {divergence.describe()}", "candidate"
                    )
                )
            else:
                across, first = "differs", f"after {ref}'s divergence"
        elif text_diff:
            # Same tokens (or no log-probs to tell a near-tie): generated values must agree.
            verdict = Verdict.FAIL if divergence is not None else Verdict.WARN
            why = "" if divergence is not None else " (no log-probs to tell a near-tie)"
            across, first = "differs", first or text_diff[0]
            findings.append(Finding(verdict, f"{suite}/{name}: generated {text_diff[0]}{why}", "candidate"))
        if name in divergences:
            d = divergences[name]
            greedy_facts.append(
                GreedyFact(case=name, compared=d.compared, position=d.position, margin=d.margin, tie=d.tie)
            )
        rows.append(CaseRow(suite, name, status["pinned"], status["candidate"], across, first))
    return findings, rows, greedy_facts


def _status(case: ServingCase | None) -> str:
    if case is None:
        return "not run"
    return "fail: " + case.problems[0] if case.problems else "pass"
