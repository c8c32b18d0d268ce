"""The plan a run.json records (`qualify.records.plan`), for readers of a run folder that may
come from another host (`qualify merge`): each stage with its checks as saved (`saved_stages`),
as the plan files would load them (`recorded_stages`), and the whole plan so loaded
(`recorded_plan`).
"""

from __future__ import annotations

from pathlib import Path

from qualify.pipeline.plan import Plan, StageSpec
from qualify.records.plan import SavedStage
from qualify.records.run import RunRecord


def saved_stages(record: RunRecord) -> tuple[SavedStage, ...]:
    """The stages of the plan `record` saved, as saved (checked when the record was read)."""
    return tuple(record.typed.plan.stages)


def recorded_stages(record: RunRecord) -> tuple[StageSpec, ...]:
    """The stages of the plan `record` saved, as the plan files would load them."""
    return tuple(
        StageSpec(
            name=entry.name,
            folder=entry.folder,
            file=Path(stage.file or ""),
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
