"""A run set's bench, measured once for all its members and read by each as its own.

The set runs one schedule with pinned and every member's candidate arm (`qualify.bench.design`);
each member's bench check then gets a folder that looks like a bench of one candidate: pinned's
units and samples, its own under `candidate/`, the schedule's units of those two roles, and the
same stopping rule (whose `alpha` is the member's share), and `shared`: how long the joint
measurement ran and the members it was made with. Its verdict comes from the kind's own `judge`,
so a rejudge of a member reads exactly what a run of one would.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from qualify.bench.design import candidate_view, complete_pairs
from qualify.checks.base import Measure
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.runstore import read_json, write_json

SCHEDULE = "schedule.json"


def member_view(joint: Path, role: str) -> Measure:
    """A `measure` that fills a member's check folder from the joint measurement in `joint`,
    where the member's arm ran as `role`."""

    def fill(ctx: CheckContext) -> None:
        if not (joint / SCHEDULE).is_file():
            raise QualifyError(
                f"the set's bench in {joint} left no schedule", "see the set's log for why it stopped"
            )
        schedule = read_json(joint / SCHEDULE)
        units = candidate_view(schedule["units"], role)
        schedule.pop("schema_version", None)
        # The members beside this one (the joint roles but pinned, which every member shares).
        others = [r for r in schedule.get("roles", [])[1:] if r != role]
        schedule.update(
            units=units,
            pairs=complete_pairs(units, ("pinned", "candidate")),
            measured_with=schedule.get("roles", []),
            joint=str(joint),
            roles=["pinned", "candidate"],
            # Where this member's time went: its check only reads the joint measurement.
            shared={
                "duration_s": schedule.get("duration_s"),
                "with": others,
                "folder": f"{joint.parent.name}/{joint.name}",  # in the set's folder
            },
        )
        for source, target in (("pinned", "pinned"), (role, "candidate")):
            if (joint / source).is_dir():
                shutil.copytree(joint / source, ctx.folder / target, dirs_exist_ok=True)
            measurement = ctx.folder / target / "measurement.json"
            if measurement.is_file():
                saved = read_json(measurement)
                saved.pop("schema_version", None)
                write_json(measurement, {**saved, "role": target, "measured_as": source})
            log = joint / "logs" / f"{source}-units.log"
            if log.is_file():
                (ctx.folder / "logs").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, ctx.folder / "logs" / f"{target}-units.log")
        write_json(ctx.folder / SCHEDULE, schedule)

    return fill
