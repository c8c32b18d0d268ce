"""The plan a run.json records, as types, for readers of a run folder that may come from another
host (`qualify merge`): each stage with its checks as saved (`saved_stages`), as the plan files
would load them (`recorded_stages`), and the whole plan so loaded (`recorded_plan`). A key of the
wrong type, missing, or one qualify does not write is refused naming run.json and the key, never
read as None.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from qualify.checks.evidence import validated
from qualify.core.checkspec import CheckSpec
from qualify.pipeline.plan import Plan, StageSpec
from qualify.pipeline.record import RunRecord

_STRICT = ConfigDict(frozen=True, extra="forbid", strict=True)


class RecordedCheck(BaseModel):
    """A check as run.json's plan records it (`CheckSpec.as_json`)."""

    model_config = _STRICT

    name: str
    kind: str
    params: dict[str, Any] = {}
    #: Numbers as saved (2 stays 2, not 2.0: the plan's digest is of the values as saved).
    limits: dict[str, int | float] = {}
    roles: list[str] = []
    timeout_s: int | float | None = None
    env: dict[str, str] = {}
    description: str = ""
    vars: dict[str, Any] = {}

    def spec(self) -> CheckSpec:
        return CheckSpec(
            name=self.name,
            kind=self.kind,
            params=dict(self.params),
            limits={k: float(v) for k, v in self.limits.items()},
            roles=tuple(self.roles),
            timeout_s=None if self.timeout_s is None else float(self.timeout_s),
            env=dict(self.env),
            description=self.description,
            vars=dict(self.vars),
        )


class RecordedStage(BaseModel):
    """A stage as run.json's plan records it (`StageSpec.as_json`)."""

    model_config = _STRICT

    name: str
    folder: str
    file: str = ""
    inconclusive: str = "fail"
    description: str = ""
    checks: list[RecordedCheck] = []
    requires: str | None = None


def saved_stages(record: RunRecord) -> tuple[RecordedStage, ...]:
    """The stages of the plan `record` saved, as saved; a stage or a check whose keys are not
    what qualify writes is refused, naming run.json and the key."""
    where = str(record.run.run_json)
    return tuple(
        validated(RecordedStage, dict(entry.spec), where, f"plan.stages[{index}]")
        for index, entry in enumerate(record.stages)
    )


def recorded_stages(record: RunRecord) -> tuple[StageSpec, ...]:
    """The stages of the plan `record` saved, as the plan files would load them."""
    return tuple(
        StageSpec(
            name=entry.name,
            folder=entry.folder,
            file=Path(stage.file),
            checks=tuple(c.spec() for c in stage.checks),
            inconclusive=stage.inconclusive,
            description=stage.description,
            requires=stage.requires,
        )
        for entry, stage in zip(record.stages, saved_stages(record), strict=True)
    )


def recorded_plan(record: RunRecord) -> Plan:
    """The plan the run.json `record` records, as the plan files would load it."""
    return Plan(
        # the plan this run records, named as the fleet holds it
        source=Path(record.run.path.name, "run.json"),
        builtin=record.builtin_plan,
        stages=recorded_stages(record),
        profile=record.profile,
    )
