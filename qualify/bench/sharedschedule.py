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
from qualify.core.runstore import write_json
from qualify.records.bench import BenchMeasurement, BenchSchedule, SharedFact

SCHEDULE = "schedule.json"


def member_view(joint: Path, role: str) -> Measure:
    """A `measure` that fills a member's check folder from the joint measurement in `joint`,
    where the member's arm ran as `role`."""

    def fill(ctx: CheckContext) -> None:
        if not (joint / SCHEDULE).is_file():
            raise QualifyError(
                f"the set's bench in {joint} left no schedule", "see the set's log for why it stopped"
            )
        schedule = BenchSchedule.read(joint / SCHEDULE)
        units = candidate_view(schedule.units, role)
        joint_roles = schedule.roles or []
        # The members beside this one (the joint roles but pinned, which every member shares).
        others = [r for r in joint_roles[1:] if r != role]
        update = {
            "units": units,
            "pairs": complete_pairs(units, ("pinned", "candidate")),
            "measured_with": joint_roles,
            "joint": str(joint),
            "roles": ["pinned", "candidate"],
            # Where this member's time went: its check only reads the joint measurement.
            "shared": SharedFact.model_validate(
                {
                    "duration_s": schedule.duration_s,
                    "with": others,
                    "folder": f"{joint.parent.name}/{joint.name}",  # in the set's folder
                }
            ),
        }
        schedule = schedule.model_copy(update=update)
        for source, target in (("pinned", "pinned"), (role, "candidate")):
            if (joint / source).is_dir():
                shutil.copytree(joint / source, ctx.folder / target, dirs_exist_ok=True)
            measurement = ctx.folder / target / "measurement.json"
            if measurement.is_file():
                saved = BenchMeasurement.read(measurement)
                renamed = saved.model_copy(update={"role": target, "measured_as": source})
                write_json(measurement, renamed.to_json())
            log = joint / "logs" / f"{source}-units.log"
            if log.is_file():
                (ctx.folder / "logs").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(log, ctx.folder / "logs" / f"{target}-units.log")
        write_json(ctx.folder / SCHEDULE, schedule.to_json())

    return fill
