"""The views of a stage and of a check that every report renders (`model.build_model` makes
them from the run folder; `headline` reads them to say what decided the verdict).

A run set's member may hold a check it did not measure itself: the set measured it once for
several members, and the member's check only read that measurement, in a moment. Its own
duration (0.0 s) says nothing of where the time went, so a check's `duration` is the text every
output prints: the shared measurement's duration, marked as shared and with whom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from qualify.checks.evidence import Evidence
from qualify.checks.figures import Chart, Table
from qualify.core.errors import RunStoreError
from qualify.records.bench import BenchFacts
from qualify.records.compile import SOURCE_COLUMNS, UNKNOWN_SOURCE, KernelFacts
from qualify.records.result import CheckResult, SavedFinding


@dataclass(frozen=True)
class SharedMeasurement:
    """The set's one measurement a member's check read: how long it took (None: not recorded),
    the other members it was made with, and its folder in the set's."""

    duration_s: float | None
    with_members: list[str]
    folder: str

    def whom(self) -> str:
        """As printed: "2 members (cand2, positive-pinned)"."""
        count = len(self.with_members)
        if not count:
            return "no other member"
        return f"{count} member{'' if count == 1 else 's'} ({', '.join(self.with_members)})"

    def describe(self) -> str:
        """As printed: "41.2 s, shared with 2 members (cand2, positive-pinned)"."""
        return f"{_seconds(self.duration_s, 'time not recorded')}, shared with {self.whom()}"


def shared_measurement(facts: Evidence | None) -> SharedMeasurement | None:
    """The shared measurement a result's typed facts record, or None (measured by the check
    itself, or by a kind that measures its members apart)."""
    shared = facts.shared_measurement if isinstance(facts, BenchFacts) else None
    if shared is None:
        return None
    duration = shared.duration_s
    if duration is not None and not 0 <= duration < math.inf:
        duration = None  # a result edited by hand says nothing of the time
    return SharedMeasurement(duration, list(shared.with_), shared.folder)


def cause_line(facts: Evidence | None) -> str:
    """The associations a kernel comparison's facts name in its headline
    (`qualify.records.compile`), as sentences; "" for any other result, or one without."""
    if not isinstance(facts, KernelFacts):
        return ""
    return "; ".join(a.sentence() for a in facts.causes if a.lead)


#: The source files summary.md names per kernel comparison.
SOURCES_NAMED = 3


def failing_sources(check: CheckView) -> str:
    """'fattn-tile-instance-dkq112-dv112.cu: 21 of 92 kernels fail; …': the source files with
    the most FAIL kernels, from the check's table of kernels by source file (`SOURCE_COLUMNS`,
    most failures first); "" for a check without one, or where no known source has a FAIL."""
    table = next((t for t in check.tables if t.columns == SOURCE_COLUMNS), None)
    if table is None:
        return ""
    failing = [r for r in table.rows if r[0] != UNKNOWN_SOURCE and isinstance(r[2], int) and r[2] > 0]
    return "; ".join(f"{r[0]}: {r[2]} of {r[1]} kernels fail" for r in failing[:SOURCES_NAMED])


def _seconds(value: float | None, unknown: str = "—") -> str:
    return unknown if value is None else f"{value:.1f} s"


@dataclass(frozen=True)
class CheckView:
    name: str
    kind: str
    verdict: str
    reason: str
    verdict_rules: str
    ungated: bool
    duration_s: float | None
    findings: list[SavedFinding]
    tables: list[Table]
    charts: list[Chart] = field(default_factory=list)
    #: What the check itself says its evidence does not cover (too few pairs, a stand-in, ...).
    limits_of_evidence: list[str] = field(default_factory=list)
    rejudged_at: str | None = None
    #: What the check judged (limits, comparisons, series), as saved in its result.
    judged: list[str] = field(default_factory=list)
    #: "was ERROR before the last re-decision", when `qualify report --rejudge` changed it.
    rejudged_from: str | None = None
    #: The run set's measurement this check read instead of measuring (None: it measured).
    shared: SharedMeasurement | None = None
    #: What goes with the check's findings, as its facts name it (`cause_line`); "" for none.
    cause: str = ""
    #: How long it took as every output prints it (derived: "41.2 s, shared with 2 members (…)").
    duration: str = field(init=False)

    def __post_init__(self) -> None:
        text = self.shared.describe() if self.shared is not None else _seconds(self.duration_s)
        object.__setattr__(self, "duration", text)


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
    #: The plan's digest and the source revision its attempt ran under (None: not recorded).
    plan_digest: str | None = None
    revision: str | None = None
    dirty: bool | None = None
    #: How that plan differed from the one the run was made with, a line a file (empty: it did
    #: not; None: the run recorded no plan to compare with).
    plan_changes: list[str] | None = None
    #: How long it took as every output prints it (derived): its own time, and the time of the
    #: run set's measurements its checks read, which its own time does not hold.
    duration: str = field(init=False)

    @property
    def changed_plan(self) -> bool:
        """The stage ran under a plan other than the one the run was made with."""
        return bool(self.plan_changes)

    def __post_init__(self) -> None:
        shared = [c for c in self.checks if c.shared is not None]
        text = _seconds(self.duration_s)
        if shared and self.duration_s is not None:
            took = [c.shared.duration_s for c in shared if c.shared is not None]
            spent = "a time not recorded" if None in took else f"{sum(t or 0.0 for t in took):.1f} s"
            names = ", ".join(c.name for c in shared)
            whom = shared[0].shared.whom() if shared[0].shared is not None else ""
            text = f"{text} here, after {spent} measuring {names} once for it and {whom}"
        object.__setattr__(self, "duration", text)


def with_shared(stages: list[StageView], run: Path) -> list[StageView]:
    """`stages` with each check's shared measurement read from its result.json in the run
    folder `run` (a check whose result does not read stays as it is: its view says why)."""
    return [
        replace(stage, checks=[_read_shared(check, run, stage.folder) for check in stage.checks])
        for stage in stages
    ]


def _read_shared(check: CheckView, run: Path, folder: str | None) -> CheckView:
    if check.shared is not None or folder is None:
        return check
    path = run / folder / check.name / "result.json"
    try:
        found = shared_measurement(CheckResult.load(path).evidence) if path.is_file() else None
    except RunStoreError:
        return check
    return check if found is None else replace(check, shared=found)
