"""The runs a fleet report merges: found in directories or archives, copied under the report's
folder (so its links work wherever the folder goes), named by host, and checked to be the same
qualification before anything is merged.

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
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qualify.core.errors import UsageError
from qualify.core.runstore import RunDir, read_json

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


def collect(inputs: list[Path], out: Path) -> list[HostRun]:
    """Every input's run copied to `out/hosts/<host>/`, in the order given."""
    if len(inputs) < 1:
        raise UsageError("nothing to merge", "give the run directories (or their archives) of each host")
    hosts: list[HostRun] = []
    (out / "hosts").mkdir(parents=True, exist_ok=True)
    for given in inputs:
        with tempfile.TemporaryDirectory(prefix="qualify-merge-") as scratch:
            found = _run_dir(given, Path(scratch))
            saved = read_json(found / "run.json")
            key = _unique(_host_key(saved), {h.key for h in hosts})
            target = out / "hosts" / key
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(found, target, symlinks=True, ignore=shutil.ignore_patterns("lock", "gcroots"))
        hosts.append(HostRun(key, RunDir(target), str(given)))
    return hosts


def _run_dir(given: Path, scratch: Path) -> Path:
    if given.is_dir():
        if (given / "run.json").is_file():
            return given
        raise UsageError(f"{given}: no run.json here", "give a run directory (runs/<id>) or its archive")
    if not given.is_file():
        raise UsageError(f"{given}: no such file or directory")
    name = given.name.lower()
    if not name.endswith(ARCHIVES):
        raise UsageError(f"{given}: not a run directory nor an archive", "archives: " + ", ".join(ARCHIVES))
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(given) as archive:
                for member in archive.namelist():
                    # A name reaching outside the folder is refused, as tarfile's data filter does.
                    if Path(member).is_absolute() or ".." in Path(member).parts:
                        raise UsageError(f"{given}: {member!r} points outside the archive")
                archive.extractall(scratch)
        else:
            with tarfile.open(given) as archive:
                archive.extractall(scratch, filter="data")
    except (OSError, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{given}: cannot unpack: {exc}") from None
    runs = sorted((p.parent for p in scratch.rglob("run.json")), key=lambda p: len(p.parts))
    if not runs:
        raise UsageError(f"{given}: the archive holds no run.json", "archive the run directory itself")
    return runs[0]


def _host_key(saved: dict[str, Any]) -> str:
    host = saved.get("provenance", {}).get("host", {})
    name = host.get("label") or host.get("hostname") or "host"
    return _SAFE.sub("_", str(name)).strip("._") or "host"


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
