"""Checked commands, contained: nothing they start outlives them, they hold no privilege over
qualify, and the run's records are out of their reach.

During a run every command qualify starts (the engine's build through nix, its tests, its
servers, its benchmarks) may be wrong or hostile. Four things hold it, each the strongest the
host gives:

- Processes. A cgroup v2 per command (`qualify.core.cgroups`): every descendant, whatever
  session or group it moves to, is in it and is ended with `cgroup.kill` when the command ends.
  Where the host lets qualify make no cgroup, the process tree (`qualify.core.proctree`):
  descendants by parent link, a mark in the environment, and qualify as child subreaper.
- Privilege. Commands run as another user with no capabilities and `no_new_privs`
  (`qualify.core.commanduser`), in a PID namespace of their own with its own /proc and cgroup
  namespace (`qualify.core.sandbox`): they cannot see, trace, signal or enter qualify, nor
  leave their cgroup.
- Records. A mount namespace (bubblewrap) in which the run folder is read-only except the
  folder of the check being measured (and, for nix, the run's GC roots): a command cannot
  change another check's or stage's records, the seal or the lock. The folder of qualify's seal
  key is hidden from it.
- The seal (`qualify.records.seal`): every file a verdict derives from is digested and the digests
  authenticated with a key only qualify's user reads, so a change is found by every reader.

`QUALIFY_CONTAINMENT` chooses among the first and the third: a comma list of `cgroup` and
`mount` (the default is both, each where the host allows it); an empty value keeps only the
fallbacks. Any other word is refused: a misspelt protection must not quietly become no
protection. The user, the PID namespace and the seal are not a choice: they are given wherever
the host can give them, and run.json says which were not.
"""

from __future__ import annotations

import itertools
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from qualify.core import cgroups, commanduser, proctree, sandbox
from qualify.core.cgroups import Cell
from qualify.core.commanduser import CommandUser
from qualify.core.errors import QualifyError, UsageError
from qualify.core.sandbox import Sandbox

ENV = "QUALIFY_CONTAINMENT"
FACILITIES = ("cgroup", "mount")


@dataclass
class Jail:
    """One run's containment: what the host gave, and the folders commands may write now."""

    root: Path  # read-only to commands: the run's folder
    mark: str  # every command's environment carries QUALIFY_RUN=<mark>.<n>
    cell: Cell | None
    box: Sandbox
    user: CommandUser
    processes: str  # how processes are held, in words
    #: What the host could not give, each in words (none on a host that gives everything).
    missing: tuple[str, ...] = ()
    writable: tuple[Path, ...] = ()
    #: Written by nix only (a privileged command): the run's GC roots.
    nix_writable: tuple[Path, ...] = ()
    #: A command that could write the records was started since `reached_records` was asked.
    reached: bool = False
    _numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def reaches_records(self, *, privileged: bool) -> bool:
        """Whether a command started now could write the run's records outside the folder lent
        to it: the run folder is not read-only to it (no bubblewrap), it keeps qualify's user
        (the records' owner, with root's capabilities: nix, or `QUALIFY_COMMAND_USER` naming
        that user), or no cgroup ends what it leaves behind (a process that left its tree lives
        on into later checks, with the files it opened while its folder was its own)."""
        return privileged or not self.box.read_only or not self.user.switched or self.cell is None

    @property
    def records(self) -> str:
        return self.box.records

    def describe(self) -> dict[str, str]:
        described = {
            "processes": self.processes,
            "records": self.box.records,
            "privileges": f"commands run {self.user.words}; {self.box.namespace}; nix runs as qualify's "
            "user, and its builders with it",
        }
        if self.missing:
            described["missing"] = "; ".join(self.missing)
        return described


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


def commands_cpu_s() -> float | None:
    """CPU seconds the run's commands have taken so far, every process of theirs counted, from
    the run's cgroup; None outside a run or without a cgroup. Where a command runs in
    bubblewrap, its CPU never reaches qualify's RUSAGE_CHILDREN: the box's first process is
    reaped by no one who waits for it (bubblewrap exits on the exit status it is sent)."""
    jail = _jail
    if jail is None or jail.cell is None:
        return None
    return jail.cell.cpu_s()


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


@contextmanager
def contained(
    root: Path, run_id: str, hidden: Sequence[Path] = (), also_missing: Sequence[str] = ()
) -> Iterator[Jail]:
    """Contain every command started inside the block (see the module's docstring); on leaving,
    end whatever is still in the run's cgroup, or re-parented to qualify. `hidden`: folders no
    command may see (the seal key's); `also_missing`: protections the run lacks that are not the
    containment's to give (nix's builders' user, `qualify.core.nixbuilders`)."""
    global _jail  # noqa: PLW0603  (one run per process; set and restored here only)
    wanted = chosen()
    user = commanduser.chosen_user()
    cell, how = cgroups.run_cell(run_id) if "cgroup" in wanted else (None, "not chosen")
    missing: list[str] = []
    if cell is None:
        subreaper = proctree.become_subreaper()
        processes = f"process tree ({how}): descendants, an environment mark" + (
            ", qualify as child subreaper" if subreaper else ""
        )
        missing.append(f"a cgroup per command ({how})")
    else:
        processes = how
    box = sandbox.probe(
        root, read_only="mount" in wanted, hidden=hidden, unprivileged=user.drop, own_proc=user.switched
    )
    missing += box.missing
    if user.missing is not None:
        missing.append(user.missing)
    if hidden and not user.switched and box.bwrap is None:
        # Of qualify's own user and in no mount namespace: the key's folder is theirs to read.
        missing.append("a seal key out of the commands' reach (they are qualify's user, without bubblewrap)")
    missing += also_missing
    before, _jail = _jail, Jail(root, secrets.token_hex(8), cell, box, user, processes, tuple(missing))
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
def writing(folder: Path, gcroots: Path | None = None) -> Iterator[None]:
    """Let the commands started inside the block write `folder` (a check's own folder), and nix
    `gcroots`; when the block ends (every command of the check has ended), everything in the
    folder is qualify's again, so that no later check can change it."""
    jail = _jail
    if jail is None:
        yield
        return
    before = jail.writable, jail.nix_writable
    jail.writable = (folder.resolve(),)
    jail.nix_writable = () if gcroots is None else (gcroots.resolve(),)
    try:
        yield
    finally:
        jail.writable, jail.nix_writable = before
        commanduser.take_back(jail.user, folder)


@contextmanager
def lending(folder: Path, keep: str = ".git") -> Iterator[None]:
    """Let the commands started inside the block edit `folder`, a tree qualify made outside the
    run (a clone of the project the pin's move is made in) but its `keep`; on leaving, it is
    qualify's again, and a `keep` a command planted below it is refused: qualify's own tools
    (git, nix) would take it for the repository."""
    jail = _jail
    user = jail.user if jail is not None else None
    if user is not None:
        commanduser.lend(user, folder, keep)
    try:
        yield
    finally:
        planted = commanduser.returned(user, folder, keep) if user is not None else []
    if planted:
        raise QualifyError(
            f"a command made {', '.join(map(str, planted))}: qualify does not run git or nix where a "
            "repository of a command's making would be taken for its own",
            "let the command change the project's files only",
        )


def wrap(argv: Sequence[str], env: Mapping[str, str], *, privileged: bool = False) -> Wrapped:
    """`argv` as it starts inside the run's containment (as it is, outside a run). `privileged`:
    nix, which writes the store as its owner, keeps qualify's user."""
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
    writable = [f for f in jail.writable if f.is_dir() and jail.root in f.parents]
    if privileged:
        writable += [f for f in jail.nix_writable if f.is_dir() and jail.root in f.parents]
    else:
        for folder in writable:
            commanduser.hand_over(jail.user, folder)
    prefix += jail.box.prefix(writable, own_proc=jail.user.switched and not privileged)
    if not privileged:
        prefix += jail.user.drop
    if jail.reaches_records(privileged=privileged):
        jail.reached = True
    return Wrapped([*prefix, *argv], {**env, proctree.MARK: mark}, cell, mark)


def reached_records() -> bool:
    """Whether a command started since this was last asked could have written the run's records
    outside its check's folder (`Jail.reaches_records`), and so the seal must compare every
    sealed file now; asking clears it. True outside a run's containment, where nothing is known
    of what its commands could write."""
    jail = _jail
    if jail is None:
        return True
    reached, jail.reached = jail.reached, False
    return reached


def runs_root(run_path: Path) -> Path:
    """The folder commands of a run see read-only: the run's own (a set's, for its members).
    Not the runs directory: a project may keep its runs where its commands write."""
    return run_path.resolve()
