"""The runs a fleet report merges: found in directories or archives, copied under the report's
folder (so its links work wherever the folder goes), named by host, and checked to be the same
qualification before anything is merged.

What comes in is read as outside input: an archive is unpacked within caps (`unpack`), every
run.json's labels must name folders inside the run (`qualify.core.labels`), and no HTML file
is copied: each host's report is rendered again from its JSON, so nothing the fleet page links
to was written by anyone but qualify.

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
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.core.errors import RunStoreError, UsageError
from qualify.core.labels import MAX_LENGTH, check_saved_labels
from qualify.core.runstore import RunDir, read_json
from qualify.report.unpack import Caps, unpack

ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst", ".zip")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class HostRun:
    """One host's run (or run set), copied under the fleet's folder."""

    key: str  # the host's folder under hosts/, and its name in the report
    run: RunDir
    source: str  # what the caller gave: a directory or an archive

    @property
    def saved(self) -> dict[str, Any]:
        return self.run.read()


def collect(inputs: list[Path], out: Path, caps: Caps | None = None) -> list[HostRun]:
    """Every input's run copied to `out/hosts/<host>/`, in the order given; archives are
    unpacked within `caps` (the documented defaults when None)."""
    if len(inputs) < 1:
        raise UsageError("nothing to merge", "give the run directories (or their archives) of each host")
    caps = caps or Caps.default()
    hosts: list[HostRun] = []
    (out / "hosts").mkdir(parents=True, exist_ok=True)
    for given in inputs:
        with tempfile.TemporaryDirectory(prefix="qualify-merge-") as scratch:
            found = _run_dir(given, Path(scratch), caps)
            where = (
                f"{given}: {found.relative_to(scratch) / 'run.json'}"
                if found.is_relative_to(scratch)
                else str(found / "run.json")
            )
            saved = _checked_run(found, where)
            key = _unique(_host_key(saved), {h.key for h in hosts})
            target = out / "hosts" / key
            if target.exists():
                shutil.rmtree(target)
            _copy_run(found, target, given)
        hosts.append(HostRun(key, RunDir(target), str(given)))
    return hosts


def _run_dir(given: Path, scratch: Path, caps: Caps) -> Path:
    if given.is_dir():
        if (given / "run.json").is_file():
            return given
        raise UsageError(f"{given}: no run.json here", "give a run directory (runs/<id>) or its archive")
    if not given.is_file():
        raise UsageError(f"{given}: no such file or directory")
    name = given.name.lower()
    if not name.endswith(ARCHIVES):
        raise UsageError(f"{given}: not a run directory nor an archive", "archives: " + ", ".join(ARCHIVES))
    unpack(given, scratch, caps)
    runs = sorted((p.parent for p in scratch.rglob("run.json")), key=lambda p: len(p.parts))
    if not runs:
        raise UsageError(f"{given}: the archive holds no run.json", "archive the run directory itself")
    return runs[0]


def _checked_run(found: Path, where: str) -> dict[str, Any]:
    """The run's run.json (`where` names it as the caller gave it), once every label in it and in
    its members' run.json names a folder inside the run."""
    try:
        saved = read_json(found / "run.json")
    except RunStoreError as exc:
        raise RunStoreError(exc.message.replace(str(found / "run.json"), where), exc.hint) from None
    check_saved_labels(saved, where)
    for member in saved.get("members", []) if saved.get("kind") == "set" else []:
        own = found / member["label"] / "run.json"
        if own.is_file():
            check_saved_labels(read_json(own), f"{where.removesuffix('run.json')}{member['label']}/run.json")
    return saved


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


def _host_key(saved: dict[str, Any]) -> str:
    """The host's folder under hosts/: its label (else hostname) as a safe folder name."""
    host = saved.get("provenance", {}).get("host", {})
    name = host.get("label") or host.get("hostname") or "host"
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


def identity(saved: dict[str, Any]) -> dict[str, str | None]:
    """What must match for runs to merge: revision, lock, plan and profile."""
    prov = saved.get("provenance", {})
    git = prov.get("git") or {}
    return {
        "source revision": git.get("rev"),
        "flake.lock": (prov.get("flake_lock") or {}).get("sha256"),
        "plan": plan_digest(saved.get("plan", {})),
        "profile": saved.get("profile"),
    }


def plan_digest(plan: dict[str, Any]) -> str:
    """A digest of the plan's substance: each stage's checks with their kind, parameters,
    limits, roles and variables, without the paths it was read from."""
    stages = [
        {
            "name": s.get("name"),
            "inconclusive": s.get("inconclusive"),
            "checks": [
                {k: c.get(k) for k in ("name", "kind", "params", "limits", "roles", "vars", "timeout_s")}
                for c in s.get("checks", [])
            ],
        }
        for s in plan.get("stages", [])
    ]
    text = json.dumps(stages, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mismatches(hosts: list[HostRun]) -> list[str]:
    """What differs between the hosts' runs, one line per property that does."""
    found = []
    ids = {h.key: identity(h.saved) for h in hosts}
    for name in ("source revision", "flake.lock", "plan", "profile"):
        values = {key: ident[name] for key, ident in ids.items()}
        if len(set(values.values())) > 1:
            found.append(f"{name}: " + ", ".join(f"{k} {_short(v)}" for k, v in values.items()))
    return found


def _short(value: str | None) -> str:
    if value is None:
        return "(none)"
    return value[:12] if re.fullmatch(r"[0-9a-f]{16,}", value) else value
