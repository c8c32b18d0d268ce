"""A run set's check of a kind that measures each role on its own (`command`, `tests`, `soak`),
measured once for all members: pinned (and any other shared role) once, each member's arm
beside it.

Each member's check folder then holds what a run of one would have saved: the shared roles'
folders and logs, and its arm's under `candidate/` (hard links where the file system allows,
so nothing is stored twice). Its verdict comes from the kind's own `judge`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from qualify.checks.base import Measure
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.runstore import read_json, write_json


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def role_view(joint: Path, role: str) -> Measure:
    """A `measure` that fills a member's check folder from the set's measurement in `joint`,
    where the member's arm ran as `role`."""

    def fill(ctx: CheckContext) -> None:
        if not joint.is_dir():
            raise QualifyError(f"the set's measurement in {joint} is missing", "see the set's log")
        for shared in joint.iterdir():
            if shared.is_file():  # what the check wrote for every role (the soak's workload)
                shutil.copy2(shared, ctx.folder / shared.name)
        for target in ctx.roles:
            source = role if target == "candidate" else target
            if (joint / source).is_dir():
                shutil.copytree(
                    joint / source,
                    ctx.folder / target,
                    symlinks=True,
                    copy_function=_link_or_copy,
                    dirs_exist_ok=True,
                )
            measurement = ctx.folder / target / "measurement.json"
            if measurement.is_file():
                saved = read_json(measurement)
                saved.pop("schema_version", None)
                measurement.unlink()  # a link to the set's file: written anew, not through it
                write_json(measurement, {**saved, "role": target, "measured_as": source})
            for log in sorted((joint / "logs").glob(f"{source}-*.log")) if (joint / "logs").is_dir() else ():
                (ctx.folder / "logs").mkdir(exist_ok=True)
                shutil.copyfile(log, ctx.folder / "logs" / log.name.replace(f"{source}-", f"{target}-", 1))

    return fill
