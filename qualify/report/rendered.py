"""What a report.json says of the verdict, read back typed: the commands that render a report
print its verdict from the file just written, and read no other key of it."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from qualify.checks.evidence import validated
from qualify.core.runstore import read_json


class RenderedVerdict(BaseModel):
    """The verdict a report.json gives (a run's, a set's or a fleet's: each writes it first);
    the rest of the report is the model that rendered it, not read here."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    verdict: str
    #: The verdict as every output's first line says it ("QUALIFIED — bench undecided").
    verdict_line: str

    @classmethod
    def read(cls, path: Path) -> RenderedVerdict:
        """The verdict of the report.json at `path`, refused naming the file and the key."""
        return validated(cls, read_json(path), path)
