"""What `qualify runs` lists of each run in a runs folder, from its record as checked on load."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from qualify.core.errors import QualifyError

if TYPE_CHECKING:
    from qualify.core.runstore import RunDir
    from qualify.records.run import RunRecord


def _derived_verdict(entry: RunDir, record: RunRecord) -> str:
    """The verdict of a run, a set or a fleet from its folders now, never the saved one."""
    if record.kind == "fleet":
        from qualify.report.fleet import fleet_model

        return fleet_model(entry.path).verdict
    from qualify.pipeline.ondisk import verdict_on_disk

    return verdict_on_disk(entry)[0].value


def run_entry(entry: RunDir) -> dict[str, Any]:
    """What `runs` lists of a run, from its record as checked on load: a run.json that does
    not read or hold is listed as broken, with why and what to do, and never hides the others."""
    from qualify.pipeline.ondisk import status_of
    from qualify.records.run import RunRecord

    try:
        saved = entry.read()
        record = RunRecord.parse(entry, saved)
        status = status_of(entry, record)
        verdict = _derived_verdict(entry, record)
        candidate = _candidates(record)
    except QualifyError as exc:
        return {
            "run_id": entry.run_id,
            "path": str(entry.path),
            "status": "broken",
            "error": exc.message,
            "hint": exc.hint,
        }
    return {
        "run_id": entry.run_id,
        "path": str(entry.path),
        "sequence": entry.sequence,
        "candidate": candidate,
        "profile": record.profile,
        "status": status,
        "verdict": verdict,
        "created_at": record.created_at or None,
    }


def _candidates(record: RunRecord) -> str | None:
    """The run's candidate arm; a run set's candidates, and how many controls ran with them."""
    if record.kind == "fleet":
        from qualify.report.fleetrecord import fleet_part

        return f"fleet of {len(fleet_part(record).hosts)} hosts"
    if not record.is_set:
        return record.candidate_arm
    names = ", ".join(m.arm for m in record.members if not m.is_control)
    controls = sum(m.is_control for m in record.members)
    return names + (f" (+{controls} control{'s' if controls > 1 else ''})" if controls else "")
