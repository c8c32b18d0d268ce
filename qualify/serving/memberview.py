"""A run set's serving check, measured once for all its members: pinned's server and suites
once, each member's beside it, and one timing schedule in which every round sends one request
to pinned and one to each member (`qualify.serving.timing.run_timing`).

Each member's check folder then holds what a run of one would have saved: pinned's and its own
arm's folders and logs (`qualify.checks.roleview`), and the timing records of pinned and its arm
alone, its arm's named "candidate", paired by round. Its verdict comes from the kind's own
`judge`, so a rejudge of a member reads exactly what a run of one would.
"""

from __future__ import annotations

from pathlib import Path

from qualify.checks.base import Measure
from qualify.checks.roleview import role_view
from qualify.core.context import CheckContext
from qualify.core.runstore import write_json
from qualify.records.serving import ServingTiming
from qualify.serving.judgement import TIMING


def member_timing(saved: ServingTiming, role: str) -> ServingTiming:
    """The set's timing records as a member's run of one would hold them: pinned's and `role`'s
    (as "candidate"), every other member's left out."""
    kept = [
        record.model_copy(update={"role": "candidate"}) if record.role == role else record
        for record in saved.records
        if record.role in ("pinned", role)
    ]
    return saved.model_copy(update={"records": kept})


def member_view(joint: Path, role: str) -> Measure:
    """A `measure` that fills a member's check folder from the set's serving measurement in
    `joint`, where the member's arm ran as `role`."""
    fill_roles = role_view(joint, role)

    def fill(ctx: CheckContext) -> None:
        fill_roles(ctx)
        timing = ctx.folder / TIMING
        if timing.is_file():
            saved = ServingTiming.read(timing)
            timing.unlink()  # copied from the set's: written anew for this member
            write_json(timing, member_timing(saved, role).to_json())

    return fill
