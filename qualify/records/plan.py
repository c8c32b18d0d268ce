"""The plan a run.json records, as types: the plan the run was made with (`RecordedPlan`), each
stage as saved (`SavedStage`) with its checks (`SavedCheck`), and the files the plan was read
from (`RecordedPlanFiles`). Checked with the run's record (`qualify.records.run`), for readers
of a run folder that may come from another host (`qualify merge`): a key of the wrong type,
missing, or one qualify does not write is refused naming run.json and the key, never read as
None. `qualify.pipeline.recordplan` turns them back into the plan qualify runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Discriminator, Field

from qualify.checks.evidence import Part, member
from qualify.core.checkspec import CheckSpec
from qualify.records.model import seconds


def _number_kind(value: Any) -> str:
    return "int" if isinstance(value, int) and not isinstance(value, bool) else "float"


#: A number as saved: 2 stays 2, not 2.0 (the plan's digest is of the values as saved); anything
#: else is refused as a float would be ("is a string, not a number").
SavedNumber = Annotated[
    Annotated[int, member("int")] | Annotated[float, member("float")],
    Discriminator(lambda value: member(_number_kind(value)).tag),
]


class SavedCheck(Part):
    """A check of a stage of the plan the run recorded (`CheckSpec.as_json`)."""

    name: str
    kind: str
    #: The plan's values, read by name by the check's kind.
    params: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, SavedNumber] = Field(default_factory=dict)
    roles: list[str] = Field(default_factory=list)
    timeout_s: Annotated[SavedNumber | None, BeforeValidator(seconds)] = None
    env: dict[str, str] = Field(default_factory=dict)
    description: str = ""
    vars: dict[str, Any] = Field(default_factory=dict)

    def spec(self) -> CheckSpec:
        """The check as the plan files would load it."""
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


class SavedStage(Part):
    """A stage of the plan the run recorded (`StageSpec.as_json`)."""

    name: str
    folder: str
    #: The stage's file in the project, as the plan named it (None: not recorded).
    file: str | None = None
    inconclusive: str = "fail"
    description: str = ""
    checks: list[SavedCheck] = Field(default_factory=list)
    requires: str | None = None


class RecordedPlan(Part):
    """The plan the run was made with (`Plan.as_json`)."""

    source: str | None = None
    builtin: bool = False
    profile: str | None = None
    profiles: list[str] = Field(default_factory=list)
    stages: list[SavedStage] = Field(default_factory=list)
    not_configured: list[str] = Field(default_factory=list)
    #: The stages the plan declares not applicable, each with its reason.
    not_applicable: dict[str, str] = Field(default_factory=dict)


class RecordedPlanFiles(Part):
    """The files the run's plan was read from when the run was made (`planfiles.PlanFiles`),
    each by its name in the project with its sha256, and the digest of them all: what a rerun's
    plan is compared with (run.json's `plan` is the plan its latest attempt read)."""

    digest: str
    files: dict[str, str]
