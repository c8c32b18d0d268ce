"""What a result.json holds besides its verdict, as types: its findings, the roles it measured
and the facts every kind's share, checked when the result is read
(`qualify.pipeline.checkrecords`)."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from qualify.pipeline.recordmodel import OutputText, RecordPart, VerdictWord


class SavedFinding(RecordPart):
    """One finding of a check (`qualify.checks.base.Finding` as saved): its verdict word, its
    message and the role it is about (None: the whole check; the key is always written)."""

    verdict: VerdictWord
    message: OutputText
    role: str | None

    def as_json(self) -> dict[str, Any]:
        return self.model_dump()


class RolePlayed(RecordPart):
    """A role as the check measured it: the arm that played it and the build it ran."""

    arm: str
    out: str | None = None


class ResultFacts(RecordPart):
    """What a judge wrote beside its verdict. Each kind's facts are its own type
    (`CheckResult.evidence`); what every reader shares is declared here, the rest kept as it
    was written."""

    model_config = ConfigDict(extra="allow")

    #: What the check itself says its evidence does not cover (too few pairs, a stand-in, ...).
    limits_of_evidence: list[str] | None = None
