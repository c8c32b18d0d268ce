"""Turning a check's findings into its verdict and the one line that says why."""

from __future__ import annotations

from collections.abc import Sequence

from qualify.checks.base import Finding
from qualify.core.verdicts import Verdict

_ORDER = (Verdict.FAIL, Verdict.ERROR, Verdict.INCONCLUSIVE, Verdict.WARN, Verdict.PASS)


def worst(findings: Sequence[Finding], default: Verdict = Verdict.PASS) -> Verdict:
    """The most severe finding (FAIL > ERROR > INCONCLUSIVE > WARN > PASS)."""
    verdicts = [f.verdict for f in findings if f.verdict in _ORDER]
    return min(verdicts, key=_ORDER.index) if verdicts else default


def headline(verdict: Verdict, findings: Sequence[Finding], ok: str) -> str:
    """The first finding that made `verdict` (role, first line, how many more), or `ok`."""
    bad = [f for f in findings if f.verdict is verdict and verdict is not Verdict.PASS]
    if not bad:
        return ok
    first = bad[0].message.splitlines()[0] if bad[0].message else ""
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return (f"{bad[0].role}: {first}" if bad[0].role else first) + more


def reason_line(verdict: Verdict, findings: Sequence[Finding], summary: str, first: str | None = None) -> str:
    """A judgement's reason: what made `verdict` (`first`, else the first finding that did, as
    `headline` says it), then the check's `summary` after a dash; the summary alone when no
    finding made the verdict."""
    said = first or headline(verdict, findings, summary)
    return f"{said} — {summary}" if summary and said != summary else said
