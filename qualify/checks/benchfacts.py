"""What a bench check's judge writes beside its verdict (`BenchFacts`): the stopping rule it
ran by, each test's finding with its ratio and interval, the machine's state and, in a run set,
the one measurement its members share. Here, below the stages, because the fleet merge and the
report read them too, and neither imports a stage."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from qualify.checks.evidence import Evidence, Part


class StoppingRule(Part):
    """The group-sequential design, fixed before the first pair ran, as schedule.json holds it
    (the judge needs `alpha` and `looks`; the rest is shown when the schedule recorded it)."""

    alpha: float
    looks: list[int] = Field(description="the pair counts at which the data were looked at")
    tests: int | None = None
    first_level: float | None = Field(None, description="the first Holm step at the first look")
    computed_min_pairs: int | None = None
    max_pairs: int | None = None
    budget_s: float | None = None
    margin: float | None = None


class BenchTestFact(Part):
    """One test's finding and the figures behind it (R = candidate/pinned throughput)."""

    finding: str
    regression: bool
    invalid: str | None = Field(description="why the test's data cannot be judged")
    ratio: float | None
    low: float | None
    high: float | None
    p_value: float | None
    level: float | None
    method: str | None
    pairs: int
    look: int
    pinned: float | None = Field(description="pinned's median, in `unit`")
    candidate: float | None
    unit: str
    pair_noise: float | None

    def shown(self) -> str:
        """As a cell: "1.012 [0.998, 1.027] NO CHANGE" (the finding alone when no ratio)."""
        if self.ratio is None:
            return self.finding
        span = f" [{self.low:.3f}, {self.high:.3f}]" if self.low is not None and self.high is not None else ""
        return f"{self.ratio:.3f}{span} {self.finding}".strip()


class Machine(Part):
    gpu_telemetry: dict[str, Any] | None = Field(description="where GPU state was read, as found")
    flagged: dict[str, list[str]] = Field(description="pair units run in a state that was flagged")


class SharedFact(Part):
    """A run set's member: the joint measurement its check read."""

    duration_s: float | None
    with_: list[str] = Field(alias="with")
    folder: str

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)


class BenchFacts(Evidence):
    limits_of_evidence: list[str]
    pairs: int
    stop_reason: str | None
    plan: StoppingRule | None = Field(description="None when no rule could be made")
    margin: float
    a_a: bool = Field(description="pinned and the candidate ran the same arm")
    machine: Machine | None = Field(None, description="absent in runs made before it was recorded")
    geometric_mean_ratio: float | None
    tests: dict[str, BenchTestFact]
    shared_measurement: SharedFact | None = None
