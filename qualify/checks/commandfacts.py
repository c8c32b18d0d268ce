"""What a `command` check's judge writes beside its verdict when it judged metrics: each role's
metrics as its metrics file gave them (`qualify.checks.metrics`), with the median it was
judged on."""

from __future__ import annotations

from pydantic import Field

from qualify.checks.evidence import Evidence, Part
from qualify.checks.metrics import Metric


class MetricFact(Part):
    unit: str
    higher_is_better: bool
    median: float = Field(description="what the limits were judged on")
    samples: list[float]

    @classmethod
    def of(cls, metric: Metric) -> MetricFact:
        return cls(
            unit=metric.unit,
            higher_is_better=metric.higher_is_better,
            median=metric.median,
            samples=list(metric.samples),
        )


class CommandFacts(Evidence):
    metrics: dict[str, dict[str, MetricFact]] = Field(description="per role, per metric")
