"""The views of a stage and of a check that every report renders (`model.build_model` makes
them from the run folder; `headline` reads them to say what decided the verdict)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CheckView:
    name: str
    kind: str
    verdict: str
    reason: str
    verdict_rules: str
    ungated: bool
    duration_s: float | None
    findings: list[dict[str, Any]]
    tables: list[dict[str, Any]]
    charts: list[dict[str, Any]] = field(default_factory=list)
    #: What the check itself says its evidence does not cover (too few pairs, a stand-in, ...).
    limits_of_evidence: list[str] = field(default_factory=list)
    rejudged_at: str | None = None
    #: What the check judged (limits, comparisons, series), as saved in its result.
    judged: list[str] = field(default_factory=list)
    #: "was ERROR before the last re-decision", when `qualify report --rejudge` changed it.
    rejudged_from: str | None = None


@dataclass(frozen=True)
class StageView:
    name: str
    folder: str | None
    outcome: str
    reason: str
    configured: bool
    ungated: bool = False
    attempt: int | None = None
    earlier_attempts: int = 0
    duration_s: float | None = None
    checks: list[CheckView] = field(default_factory=list)
    #: The one line a reviewer reads (`qualify.report.headline.stage_why`).
    why: str = ""
    #: INCONCLUSIVE, or a check of it was and the plan counted that as WARN.
    undecided: bool = False
