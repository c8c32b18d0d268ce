"""run.json's `rejudged` entries as types: each `qualify report --rejudge`, when, with which plan
and which checks it changed (`qualify.pipeline.rejudge` writes them, the report reads them),
checked when the run's record is read (`qualify.records.run`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field, ValidationError

from qualify.checks.refusals import refusal
from qualify.records.model import RecordPart


class RejudgedChange(RecordPart):
    """One check whose verdict (or whose limits or judgement parameters) a rejudgement changed."""

    stage: str
    check: str
    before: str
    after: str
    limits_before: dict[str, Any] = Field(default_factory=dict)
    limits_after: dict[str, Any] = Field(default_factory=dict)
    params_before: dict[str, Any] = Field(default_factory=dict)
    params_after: dict[str, Any] = Field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """As read (saved again as it was), or every field of one a rejudgement just made."""
        return self.model_dump(exclude_unset=True)


class Rejudgement(RecordPart):
    """One `qualify report --rejudge` of the run."""

    at: str
    plan: str
    changed: list[RejudgedChange] = Field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


class _Rejudged(RecordPart):
    rejudged: list[Rejudgement] = Field(default_factory=list)


def rejudgements(document: Mapping[str, Any], where: str) -> tuple[Rejudgement, ...]:
    """`document`'s `rejudged` entries, checked: a key of the wrong type (or missing) is refused
    naming `where` and the key."""
    try:
        found = _Rejudged.model_validate({k: v for k, v in document.items() if k == "rejudged"})
    except ValidationError as exc:
        raise refusal(exc, where) from None
    return tuple(found.rejudged)
