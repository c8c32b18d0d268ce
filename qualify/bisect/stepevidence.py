"""What a probe of a step found, as types (`qualify.checks.evidence`): the step's run folder,
the gate's verdict and reason, what a check gate judged, and the gate's figure: a metric
gate's medians or a kernel-resources gate's counts. Saved with the probe in bisect.json
(`qualify.bisect.state`) and read back whole on resume and by bisect.md, bisect.html and the
console."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from qualify.checks.evidence import Part


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
