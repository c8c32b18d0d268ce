"""A fleet report: the runs of several GPU hosts on one revision, merged into one verdict.

Each host ran `qualify run` on its own (a CI matrix job, or by hand); `qualify merge` copies the
runs under one folder and writes this report from them alone: a matrix of stages × hosts (× the
candidates), each host's verdict with its GPU and driver, and what differs between hosts — a
stage that passes on one and fails on another, a kernel that spills on one target only, the
bench's ratios side by side. The fleet is QUALIFIED only when every host is. Each host's
verdict is derived from its checks as `merge` re-decided them (`fleetjudge`); a host whose
checks could not be re-decided is shown as such, each of its stages ERROR, and is never QUALIFIED.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qualify import __version__
from qualify.core.errors import RunStoreError
from qualify.core.provenance import describe_gpu
from qualify.core.runstore import SCHEMA_VERSION, RunDir
from qualify.core.verdicts import RunVerdict
from qualify.pipeline.ondisk import run_on_disk, set_on_disk
from qualify.pipeline.stageorder import with_default_order
from qualify.records.bench import BenchFacts, BenchTestFact
from qualify.records.result import CheckResult
from qualify.records.run import RunRecord
from qualify.report import fleetjudge
from qualify.report.fleetinputs import HostRun, identity
from qualify.report.fleetrecord import fleet_part
from qualify.report.headline import members_note
from qualify.report.matrix import Cell, Column
from qualify.report.model import ReportModel, VerdictView, build_model

if TYPE_CHECKING:
    import pandas as pd

PASSING = ("PASS", "WARN")
FAILING = ("FAIL", "ERROR", "INCONCLUSIVE")
#: Spill figures of the compile stage's per-kernel diff (AMDGPU and CUDA).
SPILL_COLUMNS = (
    "candidate_vgpr_spill_count",
    "candidate_sgpr_spill_count",
    "candidate_spill_store_bytes",
    "candidate_spill_load_bytes",
)


@dataclass(frozen=True)
class HostView:
    key: str
    label: str | None
    hostname: str
    kernel: str
    gpus: list[str]
    run_id: str
    kind: str  # "run" or "set"
    verdict: str
    verdict_reason: str
    controls_behaved: bool | None
    created_at: str
    finished_at: str | None
    revision: str | None
    dirty: bool
    href: str
    #: Whether the host's controls behaved, then each one's behaviour: could its gates tell?
    controls: str = ""
    #: How the host's seal reads here: "sealed and verified" only where this host made it.
    seal: str = ""


@dataclass(frozen=True)
class FleetModel(VerdictView):
    schema_version: int
    qualify_version: str
    kind: str
    run_id: str
    status: str
    verdict: str
    verdict_reason: str
    created_at: str
    identity: dict[str, str | None]
    hosts: list[HostView]
    candidates: list[str]
    stages: list[str]
    columns: list[Column]
    cells: dict[str, dict[str, Cell]]
    members: list[ReportModel]
    differences: list[str]
    #: Kernels that spill in the candidate on some hosts and not on others: kernel, then a
    #: cell per host ("spills (gfx1151)", "no spill (gfx950)", "" when the host has no such kernel).
    spills: dict[str, Any]
    #: The bench's candidate/pinned ratios per test, a cell per host, for each candidate.
    bench: dict[str, Any]
    #: Properties that differ between the hosts' runs, merged anyway (`--allow-mixed`).
    mixed: list[str] = field(default_factory=list)
    not_proven: list[str] = field(default_factory=list)
    #: What each host that did not qualify lacks, and the stages declared not applicable.
    verdict_note: str = ""


def _members(host: HostRun) -> list[tuple[str, RunDir]]:
    """(candidate arm, its run) of a host: the run itself, or each candidate member of a set."""
    record = RunRecord.load(host.run)
    if not record.is_set:
        return [(record.candidate_arm or "?", host.run)]
    return [(m.arm, RunDir(host.run.path / m.label)) for m in record.members if m.role == "candidate"]


def build_fleet_model(
    out: Path, hosts: list[HostRun], created_at: str, mixed: list[str] | None = None
) -> FleetModel:
    views = [_host_view(h) for h in hosts]
    by_host = {h.key: dict(_members(h)) for h in hosts}
    candidates: list[str] = []
    for members in by_host.values():
        candidates += [c for c in members if c not in candidates]
    stages: list[str] = []
    for h in hosts:
        stages += [s.name for s in h.record.stages if s.name not in stages]
    # A stage of the default order no host ran is a row too (NOT CONFIGURED, or NOT APPLICABLE
    # with the plan's reason): it is what keeps a fleet INCOMPLETE, or what it qualified without.
    stages = with_default_order(stages)
    columns: list[Column] = []
    cells: dict[str, dict[str, Cell]] = {s: {} for s in stages}
    models: list[ReportModel] = []
    for candidate in candidates:
        for h in hosts:
            run = by_host[h.key].get(candidate)
            key = f"{h.key}/{candidate}"
            if run is None:
                continue
            model = build_model(run)
            if h.not_rejudged is not None:
                model = fleetjudge.not_rejudged_model(model, h.not_rejudged)
            models.append(model)
            href = f"{run.path.relative_to(out)}/report.html"
            columns.append(Column(key, h.key, "candidate", candidate, model.verdict, None, "", href))
            own = {s.name: s for s in model.stages}
            for stage in stages:
                view = own.get(stage)
                cells[stage][key] = (
                    Cell(view.outcome, view.reason, f"{href}#stage-{stage}")
                    if view
                    else Cell("—", "not in this host's plan")
                )
    verdict, why = _fleet_verdict(views, {h.key for h in hosts if h.not_rejudged is not None})
    noted = [(c.key, m.verdict, m.verdict_note, m.stages) for c, m in zip(columns, models, strict=True)]
    return FleetModel(
        verdict_note=members_note(noted, verdict.value),
        schema_version=SCHEMA_VERSION,
        qualify_version=__version__,
        kind="fleet",
        run_id=out.name,
        status="complete",
        verdict=verdict.value,
        verdict_reason=why,
        created_at=created_at,
        identity=identity(hosts[0].record),
        hosts=views,
        candidates=candidates,
        stages=stages,
        columns=columns,
        cells=cells,
        members=models,
        differences=_stage_differences(
            candidates, [h for h in hosts if h.not_rejudged is None], stages, cells
        )
        + _spill_lines(hosts, by_host),
        spills=_spills(hosts, by_host),
        bench=_bench(hosts, by_host, candidates),
        mixed=list(mixed or []),
        not_proven=_not_proven(views, mixed or [], hosts),
    )


def _host_view(host: HostRun) -> HostView:
    record = host.record
    # The host's verdict from its stages as re-decided here, never the one its run.json saved.
    derived = (
        host_verdict(host.run, record)
        if host.not_rejudged is None
        else HostVerdict(RunVerdict.INCOMPLETE.value, f"not re-judged: {host.not_rejudged}", None)
    )
    origin = record.origin
    return HostView(
        key=host.key,
        label=origin.label,
        hostname="?" if origin.hostname is None else origin.hostname,
        kernel="?" if origin.kernel is None else origin.kernel,
        gpus=[describe_gpu(g) for g in origin.gpus],
        run_id=record.run_id,
        kind="set" if record.is_set else "run",
        verdict=derived.verdict,
        verdict_reason=derived.reason,
        controls_behaved=derived.controls_behaved,
        created_at=record.created_at,
        finished_at=record.finished_at,
        revision=origin.revision,
        dirty=bool(origin.dirty),
        href=f"hosts/{host.key}/report.html",
        controls=_controls_words(host, derived),
        seal=fleetjudge.seal_words(host.run),
    )


def _controls_words(host: HostRun, derived: HostVerdict) -> str:
    """A host's controls in one line: whether they behaved, then each one's behaviour."""
    if host.not_rejudged is not None:
        return "controls not known: the host was not re-judged"
    members = set_on_disk(host.run).members if host.record.is_set else []
    if not (controls := [f for f in members if f.member.is_control]):
        return "ran without controls: nothing shows its gates could tell"
    head = {True: "controls behaved", False: "controls did NOT behave", None: "controls not judged yet"}
    said = "; ".join(f.behaviour.why or f"{f.member.title} {f.member.arm}: not judged" for f in controls)
    return f"{head[derived.controls_behaved]}: {said}"


def _fleet_verdict(hosts: list[HostView], not_rejudged: set[str]) -> tuple[RunVerdict, str]:
    failed = [h.key for h in hosts if h.verdict == RunVerdict.NOT_QUALIFIED.value]
    if failed:
        return RunVerdict.NOT_QUALIFIED, "not qualified on " + ", ".join(failed)
    open_ = [
        f"{h.key} (not re-judged)" if h.key in not_rejudged else h.key
        for h in hosts
        if h.verdict != RunVerdict.QUALIFIED.value
    ]
    if open_:
        return RunVerdict.INCOMPLETE, "not decided on " + ", ".join(open_)
    return RunVerdict.QUALIFIED, f"qualified on every host ({len(hosts)})"


def _stage_differences(
    candidates: list[str], hosts: list[HostRun], stages: list[str], cells: dict[str, dict[str, Cell]]
) -> list[str]:
    lines = []
    for candidate in candidates:
        for stage in stages:
            got = {h.key: cells[stage].get(f"{h.key}/{candidate}") for h in hosts}
            seen = {k: c.outcome for k, c in got.items() if c is not None}
            passing = [k for k, o in seen.items() if o in PASSING]
            failing = [k for k, o in seen.items() if o in FAILING]
            if passing and failing:
                on = ", ".join(f"{k} ({seen[k]})" for k in failing)
                lines.append(f"{candidate} {stage}: passes on {', '.join(passing)}, not on {on}")
    return lines


def _kernel_diff(run: RunDir) -> pd.DataFrame | None:
    """The compile stage's per-kernel diff of a run, where one was saved."""
    import pandas as pd  # only a fleet with kernel diffs needs it: `qualify report` starts faster

    for path in sorted(run.path.glob("*/*/diff.parquet")):
        result = path.parent / "result.json"
        try:
            if result.is_file() and CheckResult.load(result).kind == "kernel-resources":
                return pd.read_parquet(path)
        except (RunStoreError, OSError, ValueError):
            return None
    return None


def _spilling(frame: pd.DataFrame) -> dict[str, str]:
    """kernel key -> its target, for the kernels whose candidate build spills."""
    import pandas as pd

    present = [c for c in SPILL_COLUMNS if c in frame.columns]
    if not present or frame.empty:
        return {}
    spills = frame[present].apply(pd.to_numeric, errors="coerce").fillna(0).sum(axis=1) > 0
    return {
        str(k): str(t) for k, t in zip(frame.loc[spills, "key"], frame.loc[spills, "target"], strict=True)
    }


def _spills(hosts: list[HostRun], by_host: dict[str, dict[str, RunDir]]) -> dict[str, Any]:
    """Per candidate: kernels spilling on some hosts only, with each host's target."""
    out: dict[str, Any] = {}
    for candidate in {c for members in by_host.values() for c in members}:
        frames = {
            h.key: _kernel_diff(by_host[h.key][candidate]) for h in hosts if candidate in by_host[h.key]
        }
        known = {k: f for k, f in frames.items() if f is not None}
        if len(known) < 2:
            continue
        spilling = {k: _spilling(f) for k, f in known.items()}
        targets = {
            k: dict(zip(f["key"].astype(str), f["target"].astype(str), strict=True)) for k, f in known.items()
        }
        rows = []
        for kernel in sorted(set().union(*(s.keys() for s in spilling.values()))):
            where = {k: kernel in s for k, s in spilling.items()}
            present = {k for k in known if kernel in targets[k]}
            if all(where[k] for k in present):
                continue  # spills wherever it exists: not a difference between hosts
            row = [kernel]
            for k in known:
                if kernel not in targets[k]:
                    row.append("")
                else:
                    row.append(f"{'spills' if where[k] else 'no spill'} ({targets[k][kernel]})")
            rows.append(row)
        if rows:
            out[candidate] = {"columns": ["kernel", *known], "rows": rows}
    return out


def _spill_lines(hosts: list[HostRun], by_host: dict[str, dict[str, RunDir]]) -> list[str]:
    lines = []
    for candidate, table in sorted(_spills(hosts, by_host).items()):
        for row in table["rows"][:20]:
            on = [
                h for h, cell in zip(table["columns"][1:], row[1:], strict=True) if cell.startswith("spills")
            ]
            lines.append(f"{candidate}: kernel {row[0]} spills on {', '.join(on)} only")
    return lines


def _bench(
    hosts: list[HostRun], by_host: dict[str, dict[str, RunDir]], candidates: list[str]
) -> dict[str, Any]:
    """Per candidate: each bench test's ratio and interval on every host."""
    out: dict[str, Any] = {}
    for candidate in candidates:
        per_host: dict[str, dict[str, BenchTestFact]] = {}
        for h in hosts:
            run = by_host[h.key].get(candidate)
            if run is None:
                continue
            for path in sorted(run.path.glob("*/*/result.json")):
                try:
                    result = CheckResult.load(path)
                except RunStoreError:
                    continue
                if isinstance(result.evidence, BenchFacts):
                    per_host[h.key] = result.evidence.tests
        if not per_host:
            continue
        tests: list[str] = []
        for found in per_host.values():
            tests += [t for t in found if t not in tests]
        rows = []
        for test in tests:
            row = [test]
            for h in hosts:
                fact = per_host.get(h.key, {}).get(test)
                row.append(fact.shown() if fact else "")
            rows.append(row)
        out[candidate] = {"columns": ["test", *(h.key for h in hosts)], "rows": rows}
    return out


def _not_proven(hosts: list[HostView], mixed: list[str], runs: list[HostRun]) -> list[str]:
    notes = [
        "Each host was measured on its own, at its own time: the hosts' results are not paired, and "
        "a difference between hosts can be the day (load, temperature, a driver update) as much "
        "as the GPU.",
        "A host's verdict speaks for its GPU, driver and firmware as recorded; a GPU or driver "
        "that no host here has is not covered.",
    ]
    days = sorted({h.created_at[:10] for h in hosts if h.created_at})
    if len(days) > 1:
        notes.append(f"The runs were made on {len(days)} different days ({', '.join(days)}).")
    for h in hosts:
        if h.dirty:
            notes.append(f"{h.key} built from a tree with uncommitted changes.")
        if not h.gpus:
            notes.append(f"{h.key} saw no GPU: nothing there exercised GPU code.")
        if h.kind == "set" and h.controls_behaved is not True:
            notes.append(f"{h.key}: its controls did not all behave ({h.verdict_reason}).")
        if h.kind == "run":
            notes.append(f"{h.key} ran without controls: nothing there shows its gates could tell.")
    notes += fleetjudge.seal_notes([(h.key, h.seal) for h in hosts])
    notes += [f"Merged although they differ — {line}." for line in mixed]
    return notes + fleetjudge.not_rejudged_notes(runs)


def is_fleet(out: Path) -> bool:
    try:
        return (out / "run.json").is_file() and RunRecord.load(RunDir(out)).kind == "fleet"
    except RunStoreError:
        return False


def fleet_model(out: Path) -> FleetModel:
    """The model of a merged report, from its folder alone (its host keys and the hosts' member
    labels checked to name folders inside it: the folder may come from anywhere)."""
    record = RunRecord.load(RunDir(out))
    part = fleet_part(record)
    hosts = [HostRun(h.key, RunDir(out / "hosts" / h.key), h.source, h.not_rejudged) for h in part.hosts]
    for host in hosts:
        _ = host.record  # its labels checked to name folders inside it
    return build_fleet_model(out, hosts, record.created_at, list(part.mixed))


@dataclass(frozen=True)
class HostVerdict:
    verdict: str
    reason: str
    controls_behaved: bool | None


def host_verdict(run: RunDir, record: RunRecord) -> HostVerdict:
    """A host's run or set verdict derived from its folders (`ondisk`)."""
    if record.is_set:
        found = set_on_disk(run, seal_required=False)
        return HostVerdict(found.verdict.value, found.reason, found.controls_behaved)
    one = run_on_disk(run, seal_required=False)
    return HostVerdict(one.verdict.value, one.unfinished or "", None)
