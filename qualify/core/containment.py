"""Checked commands, contained: nothing they start outlives them, and the run's records are
out of their reach.

During a run every command qualify starts (the engine's build through nix, its tests, its
servers, its benchmarks) may be wrong or hostile. Two things hold it, each the strongest the
host gives:

- Processes. A cgroup v2 per command (`qualify.core.cgroups`): every descendant, whatever
  session or group it moves to, is in it and is ended with `cgroup.kill` when the command ends.
  Where the host lets qualify make no cgroup, the process tree (`qualify.core.proctree`):
  descendants by parent link, a mark in the environment, and qualify as child subreaper.
- Records. A mount namespace (bubblewrap) in which the run folder is read-only except the
  folder of the check being measured (and the run's GC roots, which nix writes): a command
  cannot change another check's or stage's records, the seal or the lock. Where bubblewrap
  cannot make one, the records are sealed (`qualify.core.seal`) and a change is found.

`QUALIFY_CONTAINMENT` chooses among them: a comma list of `cgroup` and `mount` (the default is
both, each where the host allows it); an empty value keeps only the fallbacks. Any other word is
refused: a misspelt protection must not quietly become no protection.
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from qualify.core import cgroups, proctree
from qualify.core.cgroups import Cell
from qualify.core.errors import QualifyError, UsageError

ENV = "QUALIFY_CONTAINMENT"
FACILITIES = ("cgroup", "mount")


@dataclass
class Jail:
    """One run's containment: what the host gave, and the folders commands may write now."""

    root: Path  # read-only to commands: the run's folder
    mark: str  # every command's environment carries QUALIFY_RUN=<mark>.<n>
    cell: Cell | None
    bwrap: str | None
    processes: str  # how processes are held, in words
    records: str  # how records are kept out of reach, in words
    writable: tuple[Path, ...] = ()
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def describe(self) -> dict[str, str]:
        return {"processes": self.processes, "records": self.records}


@dataclass(frozen=True)
class Wrapped:
    """A command as it is started: its argv behind the containment, and what holds it."""

    argv: list[str]
    env: dict[str, str]
    cell: Cell | None
    mark: str | None


_jail: Jail | None = None


def current() -> Jail | None:
    return _jail


def chosen() -> set[str]:
    """The protections `QUALIFY_CONTAINMENT` asks for; an unknown word is refused, never dropped
    (dropping it would run the commands with less containment than the user meant to ask for)."""
    raw = os.environ.get(ENV)
    if raw is None:
        return set(FACILITIES)
    words = [word.strip() for word in raw.split(",") if word.strip()]
    unknown = [word for word in words if word not in FACILITIES]
    if unknown:
        raise UsageError(
            f"{ENV}={raw!r}: unknown value {', '.join(repr(w) for w in unknown)}; "
            f"accepted: a comma list of {' and '.join(FACILITIES)}, or empty for neither",
            f"unset {ENV} for both protections, or spell it e.g. {ENV}={','.join(FACILITIES)}",
        )
    return set(words)


def _bwrap(root: Path) -> tuple[str | None, str]:
    found = shutil.which("bwrap")
    if found is None:
        return None, "sealed: bubblewrap (bwrap) is not installed, so commands can write the run folder"
    probe = [found, "--dev-bind", "/", "/", "--ro-bind", str(root), str(root), "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"sealed: bubblewrap could not start ({exc})"
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no reason given"]
        return None, f"sealed: bubblewrap cannot make a mount namespace here ({why[0]})"
    return found, f"read-only mount (bubblewrap): {root} read-only to commands but for their check's folder"


@contextmanager
def contained(root: Path, run_id: str) -> Iterator[Jail]:
    """Contain every command started inside the block (see the module's docstring); on leaving,
    end whatever is still in the run's cgroup, or re-parented to qualify."""
    global _jail  # noqa: PLW0603  (one run per process; set and restored here only)
    wanted = chosen()
    cell, how = cgroups.run_cell(run_id) if "cgroup" in wanted else (None, "not chosen")
    if cell is None:
        subreaper = proctree.become_subreaper()
        processes = f"process tree ({how}): descendants, an environment mark" + (
            ", qualify as child subreaper" if subreaper else ""
        )
    else:
        processes = how
    bwrap, records = _bwrap(root) if "mount" in wanted else (None, f"sealed: mount not chosen ({ENV})")
    before, _jail = _jail, Jail(root, secrets.token_hex(8), cell, bwrap, processes, records)
    try:
        yield _jail
    finally:
        _jail = before
        if cell is not None:
            cell.kill()
        else:
            leftovers = proctree.orphans(proctree.table())
            if leftovers:
                proctree.end(leftovers, grace_s=1.0)


@contextmanager
def writing(*folders: Path) -> Iterator[None]:
    """Let the commands started inside the block write `folders` (a check's own folder)."""
    jail = _jail
    if jail is None:
        yield
        return
    before = jail.writable
    jail.writable = tuple(f.resolve() for f in folders)
    try:
        yield
    finally:
        jail.writable = before


def wrap(argv: Sequence[str], env: Mapping[str, str]) -> Wrapped:
    """`argv` as it starts inside the run's containment (as it is, outside a run)."""
    jail = _jail
    if jail is None:
        return Wrapped(list(argv), dict(env), None, None)
    number = next(jail._numbers)
    mark = f"{jail.mark}.{number}"
    prefix: list[str] = []
    cell: Cell | None = None
    if jail.cell is not None:
        try:
            cell = jail.cell.child(f"cmd-{number}")
        except OSError as exc:
            raise QualifyError(
                f"{jail.cell.path}: cannot make the cgroup a command runs in: {exc.strerror or exc}",
                f"a command is never run uncontained; free the cgroup hierarchy, or set {ENV}= "
                "to hold commands by the process tree instead",
            ) from None
        prefix += cgroups.entering(cell)
    if jail.bwrap is not None:
        prefix += [jail.bwrap, "--dev-bind", "/", "/", "--ro-bind", str(jail.root), str(jail.root)]
        for folder in jail.writable:
            if folder.is_dir() and jail.root in folder.parents:
                prefix += ["--bind", str(folder), str(folder)]
        prefix += ["--die-with-parent", "--"]
    return Wrapped([*prefix, *argv], {**env, proctree.MARK: mark}, cell, mark)


def runs_root(run_path: Path) -> Path:
    """The folder commands of a run see read-only: the run's own (a set's, for its members).
    Not the runs directory: a project may keep its runs where its commands write."""
    return run_path.resolve()
