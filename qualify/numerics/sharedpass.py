"""A run set's numerics, scored once for all its members and read by each as its own.

The set scores the reference, pinned and pinned.2 once, and every member's arm beside them
(`stream = true`: all at the same time into pipes; otherwise one after another, pinned's file
kept until the last); one reference and one noise floor serve every member. Each member's check
folder then gets a measurement of four roles, as a run of one would have saved it: the
per-token vectors of reference, pinned, pinned.2 and its arm (named "candidate"), their
measurements and logs, and the record of the pass. Its verdict comes from the kind's own
`judge`, so a rejudge of a member reads exactly what a run of one would.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from qualify.checks.base import Measure
from qualify.core.context import CheckContext
from qualify.core.errors import QualifyError
from qualify.core.runstore import write_json
from qualify.numerics.judge import FLOOR_ROLE
from qualify.numerics.store import load_stats, save_stats
from qualify.numerics.tokenstats import TokenStats
from qualify.records.numerics import ArtifactError, KldMeasurement, NumericsRecord

RECORD = "numerics.json"
SHARED = ("reference", "pinned", FLOOR_ROLE)


def member_stats(stats: TokenStats, role: str) -> TokenStats:
    """The vectors one member's judgement reads: the shared roles, and `role` as "candidate"."""

    def name(r: str) -> str:
        return "candidate" if r == role else r

    keep = [r for r in stats.roles if r in SHARED or r == role]
    pairs = {p: v for p, v in stats.pair.items() if all(r in keep for r in p)}
    return replace(
        stats,
        roles=tuple(name(r) for r in keep),
        role={name(r): stats.role[r] for r in keep},
        pair={(name(a), name(b)): v for (a, b), v in pairs.items()},
        kld_lower_bound={(name(a), name(b)): stats.kld_lower_bound[(a, b)] for (a, b) in pairs},
    )


def _record(record: NumericsRecord, role: str, others: set[str]) -> NumericsRecord:
    """The pass's record as a member reads it: its arm's settings under "candidate"."""
    settings = {("candidate" if r == role else r): s for r, s in record.settings.items() if r not in others}
    error = record.artifact_error
    if error and error.role == role:
        error = error.model_copy(update={"role": "candidate"})
    elif error and error.role in others:
        # Another member's stream stopped the pass: this member could not be judged.
        error = ArtifactError(
            role=error.role, message=f"the set's numerics pass stopped at another member: {error.message}"
        )
    update: dict[str, Any] = {"settings": settings}
    if error is not None:
        update["artifact_error"] = error
    return record.model_copy(update=update)


def member_view(joint: Path, role: str) -> Measure:
    """A `measure` that fills a member's check folder from the set's numerics in `joint`, where
    the member's arm was scored as `role`."""

    def fill(ctx: CheckContext) -> None:
        if not (joint / RECORD).is_file():
            raise QualifyError(f"the set's numerics in {joint} left no record", "see the set's log for why")
        record = NumericsRecord.read(joint / RECORD)
        members = {p.name for p in joint.iterdir() if p.is_dir()} - {*SHARED, role, "logs"}
        for source in (*SHARED, role):
            target = "candidate" if source == role else source
            if (joint / source / "measurement.json").is_file():
                saved = KldMeasurement.read(joint / source / "measurement.json")
                seen = saved.model_copy(update={"role": target, "measured_as": source})
                write_json(ctx.role_dir(target) / "measurement.json", seen.to_json())
            for log in (joint / "logs").glob(f"{source}-*.log") if (joint / "logs").is_dir() else ():
                (ctx.folder / "logs").mkdir(exist_ok=True)
                shutil.copyfile(log, ctx.folder / "logs" / log.name.replace(f"{source}-", f"{target}-", 1))
        write_json(ctx.folder / RECORD, _record(record, role, members).to_json())
        stats = load_stats(joint)
        if stats is not None and role in stats.roles:
            save_stats(member_stats(stats, role), ctx.folder)

    return fill
