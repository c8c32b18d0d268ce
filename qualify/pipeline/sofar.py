"""The run so far, as a check that closes it reads it (`CheckContext.earlier`): every stage
before the check's own, in the default order, with the outcome its files give it now
(`ondisk.run_on_disk`), its folder and its checks. The stages a plan leaves out or declares not
applicable are among them, so a reader sees what the run verdict will see."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qualify.core.context import StageSoFar
from qualify.core.runstore import RunDir
from qualify.pipeline.ondisk import run_on_disk
from qualify.pipeline.stageorder import with_default_order
from qualify.records.run import RunRecord


def stages_before(run: RunDir, stage: str) -> tuple[StageSoFar, ...]:
    """The stages of `run` before `stage`, as its files say now."""
    record = RunRecord.load(run)
    derived = run_on_disk(run, record)
    entries = {entry.name: entry for entry in record.stages}
    order = with_default_order([entry.name for entry in record.stages])
    before = order[: order.index(stage)] if stage in order else order
    # A stage outside the default order that `--stage` left out has no place in it, and keeps
    # the run from qualifying wherever it stood.
    before += [name for name in record.options.left_out if name not in order]
    out = []
    for name in before:
        entry = entries.get(name)
        outcome = derived.stages.get(name)
        checks = () if entry is None else tuple(_checks(entry.spec))
        out.append(
            StageSoFar(
                name=name,
                outcome="NOT CONFIGURED" if outcome is None else outcome.value,
                reason=derived.reasons.get(name, ""),
                folder=None if entry is None else run.path / entry.folder,
                checks=checks,
            )
        )
    return tuple(out)


def _checks(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (name, kind) of each check of a stage as run.json saved it (checked when read)."""
    checks = spec.get("checks") or []
    return [(str(c.get("name")), str(c.get("kind"))) for c in checks if isinstance(c, Mapping)]
