"""The check a result.json was measured with (`CheckSpec.as_json`, saved under `spec`), as a type
checked when the result is read (`qualify.pipeline.checkrecords`): `--rejudge` and the bisect's
gate judge again from it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from qualify.pipeline.recordmodel import RecordPart, Seconds


class SavedSpec(RecordPart):
    """A result's `spec`: the check's name, kind, parameters and limits as it was measured with
    them (a result saved without one: every field empty)."""

    name: str | None = None
    kind: str | None = None
    #: The plan's values, as it gave them (each kind reads its own).
    params: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, Any] = Field(default_factory=dict)
    roles: list[str] = Field(default_factory=list)
    timeout_s: Seconds | None = None
    env: dict[str, Any] = Field(default_factory=dict)
    description: str | None = None
    vars: dict[str, Any] = Field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """The spec as it was read (saved again with what a rejudgement changed)."""
        return self.model_dump(exclude_unset=True)
