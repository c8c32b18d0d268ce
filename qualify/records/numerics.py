"""What a `kld` check saves and what its judge writes beside its verdict, as types
(`qualify.checks.evidence`): each role's measurement (`KldMeasurement`: its scoring run and its
artifact), the record of the passes (`NumericsRecord`), and the facts (`KldFacts`): each role's
settings, every pair's summary, the candidate's and pinned's bounds, the non-inferiority test
and the look the judgement stopped at.

Recorded results hold two layouts of the non-inferiority test, both version 1: the first held
one bound on θ (`bound`, `method`), the current one holds the tests with the margin inside them
(`tests`). Both read; a reader asks `NoninferiorityFacts.best_test`.
"""

from __future__ import annotations

from pydantic import Field, JsonValue

from qualify.checks.evidence import Evidence, Part
from qualify.checks.rolerun import RoleRun


class PairSummary(Part):
    """Token-level figures of one role against another (`reference|candidate`)."""

    kld_mean: float
    kld_median: float
    kld_p90: float
    kld_p99: float
    kld_p999: float
    kld_max: float
    ppl_q: float
    ppl_base: float
    dppl_pct: float
    same_top_p: float = Field(description="the share of tokens whose top-1 agrees")
    rms_dp: float
    confident_flips: int
    confident_flips_per_1e5: float
    target_at_floor_base: int
    target_at_floor_other: int
    kld_lower_bound: bool = Field(description="KL from top-K rows: a lower bound")


class SkewGuard(Part):
    skewness: float
    se: float


class BoundFacts(Part):
    """One metric's estimate and its one-sided bound over chunks."""

    name: str
    estimate: float
    bound: float
    side: str = Field(description="upper or lower")
    confidence: float
    n_units: int = Field(description="chunks resampled")
    n_resamples: int
    seed: int
    z0: float
    acceleration: float
    method: str
    exact: list[str | int | float] | None = Field(
        description="family, events, trials, scale of an exact count bound"
    )
    skew_guard: SkewGuard | None


class MarginTestFacts(Part):
    """One statement of the non-inferiority margin inside the test: bounds on the mean of D."""

    name: str = Field(description="margin or floor")
    what: str = Field(description="D as a formula")
    estimate: float
    upper: float
    upper_confidence: float
    lower: float
    lower_confidence: float
    method: str


class NoninferiorityFacts(Part):
    """The candidate against pinned: θ = mean KL_C − KL_P and the δ it is held to."""

    theta: float
    delta: float
    margin: float
    mean_kl_pinned: float
    mean_kl_candidate: float
    floor: float | None = Field(description="pinned's run-to-run floor; None: not rerun")
    verdict: str
    tests: list[MarginTestFacts] | None = Field(default=None, description="the current layout")
    bound: float | None = Field(default=None, description="the first layout's one bound on θ")
    method: str | None = Field(default=None, description="the first layout's bound's method")

    @property
    def best_test(self) -> MarginTestFacts | None:
        """The test whose upper bound is lowest (the one that decides a PASS)."""
        return min(self.tests, key=lambda t: t.upper) if self.tests else None


class LookFacts(Part):
    """The look a judgement stopped at (`qualify.numerics.looks`)."""

    planned: list[int]
    look: int
    chunks: int
    confidence: float


class KldFacts(Evidence):
    settings: dict[str, dict[str, JsonValue]] = Field(description="per role, what changes numerics")
    n_tokens: int | None = None
    n_chunks: int | None = None
    kl_floor: float | None = None
    summaries: dict[str, PairSummary] | None = Field(default=None, description="per pair, `a|b`")
    bounds: dict[str, dict[str, BoundFacts]] | None = Field(default=None, description="per role, per metric")
    noninferiority: NoninferiorityFacts | None = None
    limits_of_evidence: list[str] | None = None
    looks: LookFacts | None = None

    def summary(self, of: str, against: str = "reference") -> PairSummary | None:
        return (self.summaries or {}).get(f"{against}|{of}")

    def bound(self, role: str, metric: str) -> BoundFacts | None:
        return (self.bounds or {}).get(role, {}).get(metric)


class ArtifactError(Part):
    role: str | None = Field(description="whose stream failed; None where no reader named one")
    message: str


class PassRecord(Part):
    """One pass of the stage: the roles scored together and what it cost."""

    roles: list[str]
    pairs: list[list[str]]
    seconds: float
    tokens: int
    chunks: int | None = None
    stopped_at_look: bool | None = None
    streamed: bool | None = None
    reference_bytes: int | None = None


class DiskPlan(Part):
    stored: list[str]
    bytes: int | None
    free: int


class PlannedLooks(Part):
    planned: list[int]


class NumericsRecord(Evidence):
    """The stage's record of its passes (numerics.json): what each role's settings were, what
    stopped a pass, and the looks planned; the judge reads it beside the per-token vectors."""

    passes: list[PassRecord] = Field(default_factory=list)
    settings: dict[str, dict[str, JsonValue]] = Field(default_factory=dict, description="per role")
    settings_mismatch: str | None = None
    token_mismatch: str | None = None
    artifact_error: ArtifactError | None = None
    disk: DiskPlan | None = None
    looks: PlannedLooks | None = None


class KldMeasurement(RoleRun):
    """One role's scoring run (`RoleRun`'s part) and the artifact it left. A role whose run
    failed, or did not start, holds no artifact fields; one whose artifact could not be read
    holds `artifact_error` instead of its settings."""

    seconds: float | None = Field(default=None, description="the scoring run's duration")
    artifact: str | None = Field(
        default=None, description="the artifact's path (the reference's: its place in the cache)"
    )
    settings: dict[str, JsonValue] | None = Field(
        default=None, description="what changes numerics, as this role ran (`qualify.numerics.store`)"
    )
    format: str | None = Field(default=None, description="the artifact's format, as its reader names it")
    artifact_bytes: int | None = Field(default=None, description="its size (0: a pipe, scored as it came)")
    artifact_error: str | None = Field(default=None, description="why the artifact could not be read")
    cache_key: str | None = Field(default=None, description="the reference's key in the cache")
    cached: bool | None = Field(default=None, description="the reference came from the cache, not a run")
    streamed: bool | None = Field(default=None, description="scored from a pipe as the run wrote it")
    stopped_after_chunks: int | None = Field(
        default=None, description="a streamed run ended by qualify once a look decided"
    )
