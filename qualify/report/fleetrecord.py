"""The fleet's own part of its run.json, as types: the hosts it merged (each host's folder
under hosts/, what the caller gave, its run's id and why its checks could not be re-decided,
when they could not) and what differed between their runs. `merge` writes it through these
types and the report reads it through them: a key missing, of the wrong type or not one qualify
writes is refused naming the file and the key.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from qualify.checks.evidence import Part, validated
from qualify.records.run import RunRecord


class FleetHost(Part):
    """One host of the fleet, as its run.json lists it."""

    key: str
    source: str = ""
    run_id: str | None = None
    not_rejudged: str | None = None

    def to_json(self) -> dict[str, str | None]:
        """The entry saved: `not_rejudged` only where the host's checks were not re-decided."""
        return self.model_dump(exclude={"not_rejudged"} if self.not_rejudged is None else set())


class FleetPart(BaseModel):
    """What a fleet's run.json holds beyond what every run.json does."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    hosts: list[FleetHost]
    mixed: list[str] = []


def fleet_part(record: RunRecord) -> FleetPart:
    """The hosts and differences of the fleet's run.json `record`."""
    return validated(FleetPart, dict(record.document), record.run.run_json)
