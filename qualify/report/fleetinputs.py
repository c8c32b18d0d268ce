"""The runs a fleet report merges: found in directories or archives, copied under the report's
folder (so its links work wherever the folder goes), named by host, and checked to be the same
qualification before anything is merged.

What comes in is read as outside input: an archive is unpacked within caps (`unpack`), every
run.json's labels must name folders inside the run (`qualify.core.labels`), and no HTML file
is copied: each host's report is rendered again from its JSON, so nothing the fleet page links
to was written by anyone but qualify. An input holding several runs (an archive of a runs
folder, or the folder itself) is refused unless the caller names the one to take (`pick`): an
older run that qualified is never taken over a newer one that did not by the order of a listing.

Runs merge when they qualify the same thing: the same source revision, the same flake.lock,
the same plan (stages, checks, parameters, limits and roles; paths left out) and profile.
Anything else is refused with what differs on which host, unless the caller allows it; the
report then says what differed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from qualify.core.errors import RunStoreError, UsageError
from qualify.core.labels import MAX_LENGTH
from qualify.core.runstore import RunDir
from qualify.pipeline.recordplan import saved_stages
from qualify.records import seal
from qualify.records.run import RunRecord
from qualify.report.unpack import Caps, unpack

ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst", ".zip")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class HostRun:
    """One host's run (or run set), copied under the fleet's folder."""

    key: str  # the host's folder under hosts/, and its name in the report
    run: RunDir
    source: str  # what the caller gave: a directory or an archive
    #: Why its checks could not be re-decided from their measurements here (None: they were).
    not_rejudged: str | None = None

    @property
    def record(self) -> RunRecord:
        return RunRecord.load(self.run)


def collect(
    inputs: list[Path], out: Path, caps: Caps | None = None, pick: tuple[str, ...] = ()
) -> list[HostRun]:
    """Every input's run copied to `out/hosts/<host>/`, in the order given; archives are
    unpacked within `caps` (the documented defaults when None). An input holding several runs
    gives the one `pick` names (a run id, or its folder's path inside the input)."""
    if len(inputs) < 1:
        raise UsageError("nothing to merge", "give the run directories (or their archives) of each host")
    caps = caps or Caps.default()
    hosts: list[HostRun] = []
    used: set[str] = set()
    seen: list[str] = []
    (out / "hosts").mkdir(parents=True, exist_ok=True)
    for given in inputs:
        with tempfile.TemporaryDirectory(prefix="qualify-merge-") as scratch:
            root, runs = _runs_in(given, Path(scratch), caps)
            found = _chosen(given, root, runs, pick, used)
            seen += [_run_name(root, run) for run in runs]
            where = (
                f"{given}: {found.relative_to(scratch) / 'run.json'}"
                if found.is_relative_to(scratch)
                else str(found / "run.json")
            )
            record = _checked_run(found, where)
            key = _unique(_host_key(record), {h.key for h in hosts})
            target = out / "hosts" / key
            if target.exists():
                shutil.rmtree(target)
            # A run its own runs directory here made, whose seal no longer verifies, was changed
            # since: its copy must not pass for one merely sealed on another host.
            state = seal.state_of(found)
            broken = state.words if state.trust is seal.Trust.BROKEN else None
            _copy_run(found, target, given)
        hosts.append(HostRun(key, RunDir(target), str(given), broken))
    unknown = [name for name in pick if name not in used]
    if unknown:
        raise UsageError(
            f"--run {', '.join(unknown)}: no run of the inputs has this id; runs found: {', '.join(seen)}",
            "give --run the id of a run inside an input that holds several (its folder's name)",
        )
    return hosts


def _runs_in(given: Path, scratch: Path, caps: Caps) -> tuple[Path, list[Path]]:
    """Where the input's runs are found (the folder given, or `scratch` with the archive
    unpacked in it), and each run's folder in it (a set's members are part of their set)."""
    if given.is_dir():
        if (given / "run.json").is_file():
            return given.parent, [given]  # a run folder: its members are part of it
        root = given
    elif not given.is_file():
        raise UsageError(f"{given}: no such file or directory")
    elif not given.name.lower().endswith(ARCHIVES):
        raise UsageError(f"{given}: not a run directory nor an archive", "archives: " + ", ".join(ARCHIVES))
    else:
        unpack(given, scratch, caps)
        root = scratch
    runs: list[Path] = []
    for folder in sorted((p.parent for p in root.rglob("run.json")), key=lambda p: (len(p.parts), p)):
        if not any(folder.is_relative_to(run) for run in runs):
            runs.append(folder)
    if not runs:
        what = "the folder" if given.is_dir() else "the archive"
        raise UsageError(
            f"{given}: {what} holds no run.json", "give a run directory (runs/<id>) or its archive"
        )
    return root, runs


def _chosen(given: Path, root: Path, runs: list[Path], pick: tuple[str, ...], used: set[str]) -> Path:
    """The one run of `runs` to merge: the only one, or the one `pick` names."""
    named = [run for run in runs if _names(root, run) & set(pick)]
    for run in named:
        used.update(_names(root, run) & set(pick))
    if len(runs) == 1:
        return runs[0]
    if len(named) == 1:
        return named[0]
    listing = "; ".join(_described(root, run) for run in runs)
    if named:
        raise UsageError(
            f"{given}: --run names {len(named)} of its runs ({', '.join(_run_name(root, r) for r in named)})",
            "name one run of each input: give its folder's path inside the input to --run",
        )
    raise UsageError(
        f"{given}: holds {len(runs)} runs, and one host's run is merged at a time: {listing}",
        "name the one to merge: qualify merge ... --run ID (a run's id, or its folder's path inside "
        "the input; repeat --run for each input that holds several)",
    )


def _names(root: Path, run: Path) -> set[str]:
    """What `--run` may call a run: its folder's name, its path inside the input, its run id."""
    names = {run.name, _run_name(root, run)} if run != root else set()
    record = _record(run)
    if record is not None and record.run_id:
        names.add(record.run_id)
    return names


def _record(run: Path) -> RunRecord | None:
    """The run's record, or None when its run.json does not read or hold."""
    try:
        record = RunRecord.load(RunDir(run))
        _ = record.origin  # its fields' types checked
    except RunStoreError:
        return None
    return record


def _run_name(root: Path, run: Path) -> str:
    """The run's folder inside the input ("." for an archive of a run's contents alone)."""
    return run.relative_to(root).as_posix()


def _described(root: Path, run: Path) -> str:
    """A run as a listing names it: its folder, host and start (its own words, as found)."""
    record = _record(run)
    if record is None:
        return f"{_run_name(root, run)} (its run.json does not read)"
    name = record.origin.label or record.origin.hostname or "?"
    made = (record.created_at or "?")[:32]
    return f"{_run_name(root, run)} (host {str(name)[:MAX_LENGTH]}, made {made})"


def _checked_run(found: Path, where: str) -> RunRecord:
    """The run's record (`where` names its run.json as the caller gave it), once it and its
    members' records hold: every label in them names a folder inside the run, and every field
    the merge reads is of its type."""
    record = _named(RunDir(found), where)
    if record.kind == "fleet":
        raise UsageError(
            f"{where}: a merged fleet report, not a host's run",
            "merge the hosts' runs themselves (each a folder under runs/, or its archive)",
        )
    for member in record.members:
        own = RunDir(found / member.label)
        if own.run_json.is_file():
            _named(own, f"{where.removesuffix('run.json')}{member.label}/run.json")
    return record


def _named(run: RunDir, where: str) -> RunRecord:
    """`run`'s record, refused naming its run.json as `where` says it."""
    try:
        record = RunRecord.load(run)
        _ = record.origin  # its fields' types checked
    except RunStoreError as exc:
        raise RunStoreError(exc.message.replace(str(run.run_json), where), exc.hint) from None
    return record


#: Files a host's copy leaves out: its writer's lock and store roots (nothing to hold here), and
#: anything a browser would run as a page. Every report the fleet links to is rendered again.
_LEFT_OUT = ("lock", "gcroots")
_PAGES = (".html", ".htm", ".xhtml", ".shtml", ".svg", ".svgz", ".mht", ".mhtml")


def _copy_run(found: Path, target: Path, given: Path) -> None:
    root = found.resolve()

    def left_out(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n in _LEFT_OUT or n.lower().endswith(_PAGES)}
        for name in names:
            path = Path(folder) / name
            # A link leading out of the run is not the run's: it is neither followed nor kept.
            if path.is_symlink() and not _leads_into(path, root):
                skipped.add(name)
        return skipped

    try:
        shutil.copytree(found, target, symlinks=True, ignore=left_out)
        # The copy is the fleet's: its checks are re-decided and its report written in it, so
        # folders that came read-only (an archive's modes) are made writable to their owner.
        for folder in [target, *(p for p in target.rglob("*") if p.is_dir() and not p.is_symlink())]:
            folder.chmod(folder.stat().st_mode | stat.S_IRWXU)
    except (OSError, shutil.Error) as exc:
        first = exc.args[0][0] if isinstance(exc, shutil.Error) and exc.args and exc.args[0] else exc
        raise RunStoreError(
            f"{target}: cannot copy the run of {given} here: {first}",
            "free space where --out is, or give --out on a larger disk",
        ) from None


def _leads_into(link: Path, root: Path) -> bool:
    try:
        return link.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a loop of links
        return False


def _host_key(record: RunRecord) -> str:
    """The host's folder under hosts/: its label (else hostname) as a safe folder name."""
    name = record.origin.label or record.origin.hostname or "host"
    # Short enough that `_unique`'s "-2" still makes a safe name (`name_problem`).
    key = _SAFE.sub("_", str(name)).lstrip("._-")[: MAX_LENGTH - 8].rstrip("._-")
    return key or "host"


def _unique(key: str, taken: set[str]) -> str:
    if key not in taken:
        return key
    counter = 2
    while f"{key}-{counter}" in taken:
        counter += 1
    return f"{key}-{counter}"


def identity(record: RunRecord) -> dict[str, str | None]:
    """What must match for runs to merge: revision, lock, plan and profile."""
    return {
        "source revision": record.origin.revision,
        "flake.lock": record.origin.flake_lock,
        "plan": plan_digest(record),
        "profile": record.profile,
    }


def plan_digest(record: RunRecord) -> str:
    """A digest of the plan's substance: each stage's checks with their kind, parameters,
    limits, roles and variables, without the paths it was read from."""
    stages = [
        {
            "name": entry.name,
            "inconclusive": stage.inconclusive,
            "checks": [{k: getattr(c, k) for k in _DIGESTED} for c in stage.checks],
        }
        for entry, stage in zip(record.stages, saved_stages(record), strict=True)
    ]
    text = json.dumps(stages, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: A check's keys the plan's digest covers.
_DIGESTED = ("name", "kind", "params", "limits", "roles", "vars", "timeout_s")


def mismatches(hosts: list[HostRun]) -> list[str]:
    """What differs between the hosts' runs, one line per property that does."""
    found = []
    ids = {h.key: identity(h.record) for h in hosts}
    for name in ("source revision", "flake.lock", "plan", "profile"):
        values = {key: ident[name] for key, ident in ids.items()}
        if len(set(values.values())) > 1:
            found.append(f"{name}: " + ", ".join(f"{k} {_short(v)}" for k, v in values.items()))
    return found


def _short(value: str | None) -> str:
    if value is None:
        return "(none)"
    return value[:12] if re.fullmatch(r"[0-9a-f]{16,}", value) else value
