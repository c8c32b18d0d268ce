"""`qualify merge`: the runs of several hosts copied into one fleet folder and judged together.

Each host's run (a folder or an archive, unpacked within caps) is copied under
`<out>/hosts/<key>/`, refused when the runs qualify different things (unless allowed), its
checks re-decided from their measurements (`fleetjudge`), its report rendered again from its own
JSON, and the fleet's run.json written; the fleet's model and pages come from `fleet`.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from qualify.core.errors import QualifyError, RunStoreError, UsageError
from qualify.core.verdicts import RunVerdict
from qualify.report.fleet import build_fleet_model, is_fleet
from qualify.report.fleetinputs import HostRun
from qualify.report.fleetrecord import FleetHost
from qualify.report.render import render
from qualify.report.unpack import Caps


def merge(
    inputs: list[Path],
    out: Path,
    *,
    allow_mixed: bool = False,
    caps: Caps | None = None,
    pick: tuple[str, ...] = (),
) -> RunVerdict:
    """Copy the hosts' runs under `out` (archives unpacked within `caps`; of an input holding
    several runs, the one `pick` names), refuse runs that qualify different things (unless
    `allow_mixed`), re-decide each host's checks from its measurements, render each host's
    report again from its JSON, and write `out/run.json` (kind "fleet"); `render` writes the
    fleet's reports."""
    from qualify.core.runstore import RunDir, now_iso
    from qualify.core.verdicts import exit_code_for
    from qualify.records.run import RunRecord
    from qualify.report.fleetinputs import collect, mismatches
    from qualify.report.fleetjudge import rejudge_host

    staging = _staging(out, inputs)
    try:
        hosts = collect(inputs, staging, caps, pick)
        differ = mismatches(hosts)
        if differ and not allow_mixed:
            raise UsageError(
                "these runs qualify different things: " + "; ".join(differ),
                "merge runs of one revision, lock and plan; --allow-mixed merges them anyway "
                "(the report says what differed)",
            )
        # No host's verdict is taken from its records: each is decided again from what it
        # measured, by the plan its run records (the one compared across hosts above).
        hosts = [replace(h, not_rejudged=h.not_rejudged or rejudge_host(h.run)) for h in hosts]
        for host in hosts:
            _render_host(host)
        created = now_iso()
        document = {
            "kind": "fleet",
            "run_id": out.name,
            "created_at": created,
            "status": "complete",
            "hosts": [_host_entry(h) for h in hosts],
            "mixed": differ,
        }
        record = RunRecord.parse(RunDir(staging), document)
        record.save()
        model = build_fleet_model(staging, hosts, created, differ)
        record.updated(
            verdict=model.verdict,
            verdict_reason=model.verdict_reason,
            exit_code=int(exit_code_for(RunVerdict(model.verdict))),
            identity=model.identity,
        ).save()
        try:
            if out.exists():
                shutil.rmtree(out)
            staging.rename(out)
        except OSError as exc:
            raise RunStoreError(
                f"{out}: cannot put the fleet report here: {exc.strerror or exc}",
                f"make {out.parent} writable, or give --out a folder in a writable place",
            ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return RunVerdict(model.verdict)


def _host_entry(host: HostRun) -> dict[str, str | None]:
    return FleetHost(
        key=host.key, source=host.source, run_id=host.record.run_id, not_rejudged=host.not_rejudged
    ).to_json()


def _staging(out: Path, inputs: list[Path]) -> Path:
    """A new folder beside `out` the fleet is written in (renamed to `out` once whole), after
    `out` is known to be a place for it."""
    what = "give --out a new or empty folder (the fleet report is a folder: report.html, hosts/, ...)"
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is a file, not a folder", what)
    for above in out.parents:
        if above.exists() and not above.is_dir():
            raise UsageError(f"{out}: {above} is a file, not a folder", what)
    if out.is_dir() and any(out.iterdir()) and not is_fleet(out):
        raise UsageError(f"{out}: exists and is not a fleet report", what)
    here = out.resolve()
    for given in inputs:
        if given.is_dir() and here.is_relative_to(given.resolve()):
            raise UsageError(
                f"{out}: is inside {given}, one of the runs merged", "give --out a folder outside it"
            )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as exc:
        raise RunStoreError(
            f"{out}: cannot create the fleet report's folder: {exc.strerror or exc}",
            f"give --out a folder in a writable place ({out.parent} is not one)",
        ) from None


def _render_host(host: HostRun) -> None:
    """The host's report (and each member's, for a set) rendered from its run's JSON: the
    archive's own report.html is never copied, so the fleet page links only to pages qualify wrote."""
    try:
        render(host.run)
    except QualifyError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # A run.json that qualify did not write as it is: named, not an internal error.
        raise RunStoreError(
            f"{host.source}: its report cannot be rendered from its run's JSON: {type(exc).__name__}: {exc}",
            "merge the run folder as qualify wrote it",
        ) from None
