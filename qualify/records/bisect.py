"""bisect.json, as its types: a bisect's or series' saved state (`BisectFile`), every probe with
its attempt, outcome and evidence (`SavedProbe`, `StepEvidence`), and once the search ended its
answer (`SavedAnswer`) and a row per step (`StepRow`); with the words it saves, a probe's
`Outcome` and the answer's `Finding`. Written and read through `qualify.checks.evidence`;
`qualify.bisect.state` keeps the state in memory and writes it after each change.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field, JsonValue, field_validator

from qualify.checks.evidence import Evidence, Part
from qualify.core.series import MIN_STEPS


class Outcome(StrEnum):
    """What one probe of one step found."""

    GOOD = "good"
    BAD = "bad"
    #: The step could not be built: stepped around, as `git bisect skip` does, never probed again
    #: (the same sources and toolchain fail the same way).
    SKIP = "skip"
    #: The gate was INCONCLUSIVE: measured again, up to the retries, then unknown; never guessed.
    UNDECIDED = "undecided"


class Finding(StrEnum):
    """How a search ended."""

    #: The last good step and the first bad one are next to each other.
    FOUND = "found"
    #: The flip lies between a good and a bad step with only skipped or undecided steps between.
    RANGE = "range"
    #: The known-bad end probed GOOD: the ends do not differ, the series holds no flip.
    NO_FLIP = "no flip"
    #: The known-good end probed BAD: the baseline is already bad, nothing to search.
    BASELINE_BAD = "baseline bad"
    #: An end was skipped or stayed undecided: there is no good and bad pair to search between.
    END_UNKNOWN = "end unknown"
    #: Every step of a series was probed (series mode: no search, no flip sought).
    SERIES = "series"


class MetricFigure(Part):
    """A metric gate's figure: each role's median of the metric, None where the role reported
    none."""

    candidate: float | None
    pinned: float | None

    def values(self) -> dict[str, float | None]:
        return {"candidate": self.candidate, "pinned": self.pinned}


class KernelFigure(Part):
    """A kernel-resources gate's figure: the counts that decide the step, saved by the names
    bisect.md shows. The first two are absent when the check saved no comparison
    (`diff.parquet`) to count them from."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, validate_by_name=True)

    spilling: int | None = Field(
        default=None,
        validation_alias="kernels spilling",
        serialization_alias="kernels spilling",
        description="kernels whose spills are new or grew",
    )
    losing_occupancy: int | None = Field(
        default=None,
        validation_alias="kernels losing occupancy",
        serialization_alias="kernels losing occupancy",
        description="kernels whose occupancy fell",
    )
    failing: int | None = Field(
        validation_alias="kernels failing",
        serialization_alias="kernels failing",
        description="kernels the judge failed; None: no facts",
    )

    def values(self) -> dict[str, float | None]:
        """Each count saved, by the name bisect.md shows, in the order saved."""
        shown = self.model_dump(by_alias=True, exclude_unset=True)
        return {name: None if value is None else float(value) for name, value in shown.items()}


#: A gate's figure for one step, of whichever gate saved one.
Figure = MetricFigure | KernelFigure


class StepEvidence(Part):
    """What one probe found of its step (`qualify.bisect.gate.judge_step`), kept with the probe."""

    run: str = Field(description="the step's run folder")
    gate: str = Field(description="the gate, STAGE[/CHECK[/METRIC]]")
    verdict: str = Field(description="the gate's verdict, or why it has none (NOT RUN, build FAIL)")
    reason: str
    judged: list[str] | None = Field(
        default=None, description="what the gated check judged; absent for a stage gate"
    )
    check_dir: str | None = Field(
        default=None, description="the gated check's folder; absent for a stage gate"
    )
    figure: Figure | None = Field(default=None, description="a metric or kernel-resources gate's figure")
    input: str | None = Field(default=None, description="in a series of an input's revisions: the input")
    revision: str | None = Field(default=None, description="… and the revision the step built it at")

    def saved(self) -> dict[str, object]:
        """As bisect.json holds it: the fields set, the figure's counts by their shown names."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class Mode(StrEnum):
    #: Search for the first step at which the gate flips.
    BISECT = "bisect"
    #: Probe every step in order, no search (metrics that need not flip once).
    SERIES = "series"


class SearchContext(Part):
    """What `qualify bisect` saves as a search's context: the series and gate asked for, and
    what its walk builds each step against; a resume must find it unchanged."""

    series: str = Field(description="the [series.NAME] of qualify.toml")
    gate: str = Field(description="STAGE[/CHECK[/METRIC]]")
    no_gate: bool | None = Field(default=None, description="whether the steps ran ungated")
    pinned: str | None = Field(default=None, description="the arm every step is compared with")
    candidate: str | None = Field(default=None, description="in a series of an input: the arm built with it")
    input: str | None = Field(default=None, description="in a series of an input: the input overridden")
    url: str | None = Field(default=None, description="… and the URL its revisions are of")
    profile: str | None = Field(default=None, description="the profile every step's plan was resolved with")


class SavedProbe(Part):
    """A probe as bisect.json holds it: its step by name."""

    step: str
    attempt: int
    # Enums are given as their text in a JSON document: read by value, any other text refused.
    outcome: Outcome | None = Field(strict=False, description="null while the probe is under way")
    started: str
    finished: str | None = Field(description="null while the probe is under way")
    evidence: StepEvidence | None = Field(default=None, description="null (older files: {}): none was saved")

    @field_validator("evidence", mode="before")
    @classmethod
    def _none_was_empty(cls, value: object) -> object:
        # Before its evidence had a type, a probe without any saved an empty object.
        return None if value == {} else value


class SavedAnswer(Part):
    """The answer bisect.json holds once the search ended (`qualify.bisect.answers.Answer`)."""

    finding: Finding = Field(strict=False)
    line: str = Field(description="the answer as the console printed it")
    exit_code: int
    good: int | None
    bad: int | None
    between: list[int]
    end: int | None
    monotone: bool
    contradictions: list[list[int]] = Field(description="pairs of steps that contradict one flip")


class StepRow(Part):
    """A step of an answered bisect: its settled outcome and its last finished probe's evidence."""

    step: int
    arm: str = Field(description="the step's name")
    outcome: str = Field(description="its settled outcome, or `not probed`")
    probes: int
    verdict: str | None
    reason: str | None
    run: str | None
    figure: Figure | None


class BisectFile(Evidence):
    """bisect.json: a bisect's state, and once it answered, its answer."""

    mode: Mode = Field(strict=False)
    series: list[str] = Field(min_length=MIN_STEPS, description="the steps, good end first")
    retries: int = Field(ge=0)
    context: dict[str, JsonValue] = Field(default_factory=dict, description="compared whole on resume")
    probes: list[SavedProbe]
    answer: SavedAnswer | None = None
    steps: list[StepRow] | None = None
    changed_kernels: list[str] | None = Field(
        default=None, description="from the last good to the first bad step; null without both comparisons"
    )
