"""How a role's run itself went, as a type: the part of a measurement.json that
`qualify.checks.roleruns.measure_command` writes for every kind that runs a command per role
(the command's record, the tail of its output and how it ended, or the harness's error).

A kind adds fields of its own beside these; this type reads only its own part of the document
(`RoleRun.of`), checked like any evidence (`qualify.checks.evidence`), so that the judgement of
the runs themselves reads typed values whichever kind wrote the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from qualify.checks.evidence import Evidence, Part


class RunError(Part):
    """What kept the command from running: the harness's or the machine's failure."""

    message: str
    hint: str | None = None
    missing_tool: bool | None = Field(default=None, description="a tool the command needs was not found")


class CommandRecord(Part):
    """The command as it ran (`qualify.core.process`): its argv with secrets redacted."""

    argv: list[str]
    returncode: int | None
    duration_s: float
    started_at: str | float | None
    log: str | None
    timed_out: bool


class RoleRun(Evidence):
    """A role's measurement of the `command` kind whole, and the run's part of any other's."""

    role: str | None = None
    arm: str | None = None
    measured_as: str | None = Field(
        default=None, description="in a run set's member: the role its arm ran as in the set's measurement"
    )
    error: RunError | None = None
    command: CommandRecord | None = None
    output_tail: list[str] = Field(default_factory=list)
    outcome: str | None = Field(default=None, description="how the command ended, in words")
    ok: bool = False

    @classmethod
    def of(cls, measurement: Mapping[str, Any], where: str | Path) -> RoleRun:
        """The run's part of a role's measurement, checked; the kind's own fields are left to
        the kind."""
        return cls.load({k: v for k, v in measurement.items() if k in cls.model_fields}, where)


class JUnitRun(RoleRun):
    """A role's measurement of the `tests` kind: its run, and where its JUnit XML came from."""

    junit: str | None = Field(default=None, description="the JUnit XML the command wrote (copied beside it)")
    copied_from: str | None = Field(default=None, description="the tree copied writable for the command")
