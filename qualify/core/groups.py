"""Process groups that end with qualify: a watcher per group, and the record a resume reads.

Every child of qualify runs in its own process group (`qualify.core.process`). qualify ends
those groups on every exit it sees (a timeout, Ctrl-C, SIGTERM); these pieces cover the exits it
does not see: a SIGKILL of qualify itself, or a machine that dies under it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qualify.core import cgroups, jsontext, proctree
from qualify.core.errors import RunStoreError
from qualify.core.runfolder import open_append_nofollow

if TYPE_CHECKING:
    from qualify.core.cgroups import Cell
    from qualify.core.containment import Wrapped

#: Seconds between SIGTERM and SIGKILL when a watcher ends a group.
KILL_GRACE_S = 5.0


# A watcher per process group, so that the group ends even when qualify is killed with SIGKILL
# (no handler runs then, and PR_SET_PDEATHSIG would reach only the direct child, not the
# grandchildren under a check's `/bin/sh -c`). The watcher is a shell in its own session that
# blocks reading a pipe only qualify holds open: "done" means the group already ended; end of
# file without it means qualify died, and the watcher ends the group (TERM, then KILL).
# With a cgroup (`$3`: its cgroup.kill), what left the group is ended too.
_WATCHER = (
    'read -r said; [ "$said" = done ] && exit 0; '
    'kill -TERM -"$1" 2>/dev/null; sleep "$2"; kill -KILL -"$1" 2>/dev/null; '
    '[ -n "$3" ] && echo 1 > "$3" 2>/dev/null; exit 0'
)

#: Where the run records the process groups it starts (one JSON line each), so that a resume
#: can end what a dead run left behind; None outside a run.
_group_log: Path | None = None


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Each field of a line, what its value must be, and those words for a refusal. Only `pgid` is
#: required: the others, absent from a line of a qualify before the cgroups and marks, mean
#: what such a line meant (no boot named, nothing but the group to end).
_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "pgid": (_whole, "a process group id"),
    "start": (lambda v: v is None or _whole(v), "a start time in clock ticks"),
    "boot": (lambda v: v is None or isinstance(v, str), "a boot id"),
    "mark": (lambda v: v is None or isinstance(v, str), "a mark"),
    "cgroup": (lambda v: v is None or isinstance(v, str), "a cgroup's path"),
    "argv": (
        lambda v: v is None or (isinstance(v, list) and all(isinstance(a, str) for a in v)),
        "a list of words",
    ),
}


@dataclass(frozen=True)
class GroupRecord:
    """One line of the run's record of the process groups it started (`recording_groups`). A
    dataclass checked by hand: every command qualify starts writes one, and `qualify.core` stays
    below the evidence types."""

    pgid: int
    #: The leader's start time, in clock ticks after boot; None where it was gone already.
    start: int | None = None
    #: The boot the group ran in (`boot_id`).
    boot: str | None = None
    #: The mark in the environment of the command's processes (`qualify.core.containment`).
    mark: str | None = None
    #: The command's cgroup, relative to the cgroup2 mount.
    cgroup: str | None = None
    #: The command's first words, to name what a resume ended.
    argv: tuple[str, ...] | None = None

    @staticmethod
    def read(document: object, where: str) -> GroupRecord:
        """The line `document` (`where` names it), refused naming the key that is missing, of
        the wrong type or not one qualify writes."""
        hint = "this line was not written by qualify as it is: nothing it names is ended"
        if not isinstance(document, dict):
            raise RunStoreError(f"{where}: the line is not an object", hint)
        for key, value in document.items():
            if key not in _FIELDS:
                raise RunStoreError(f"{where}: {key}: not a field this qualify knows", hint)
            if not _FIELDS[key][0](value):
                raise RunStoreError(f"{where}: {key} is {type(value).__name__}, not {_FIELDS[key][1]}", hint)
        if "pgid" not in document:
            raise RunStoreError(f"{where}: pgid is missing", hint)
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in document.items()}
        return GroupRecord(**values)

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "argv": None if self.argv is None else list(self.argv)}


@contextmanager
def recording_groups(path: Path) -> Iterator[None]:
    """Record every process group started inside the block in `path`."""
    global _group_log  # noqa: PLW0603  (one run per process; set and restored here only)
    before, _group_log = _group_log, path
    try:
        yield
    finally:
        _group_log = before


class GroupWatch:
    """The watcher of one process group (see _WATCHER)."""

    def __init__(self, pgid: int, argv: Sequence[str], held: Wrapped | None = None) -> None:
        read_end, self._write = os.pipe()
        self._proc = None
        cell = held.cell if held is not None else None
        kill_file = str(cell.path / "cgroup.kill") if cell is not None else ""
        try:
            self._proc = subprocess.Popen(
                ["/bin/sh", "-c", _WATCHER, "qualify-watch", str(pgid), str(KILL_GRACE_S), kill_file],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not in qualify's group: a Ctrl-C must not take it first
            )
        except OSError:
            pass  # no shell: the run still ends the group on every exit it sees
        except BaseException:
            os.close(self._write)  # interrupted while starting: no watcher left waiting on us
            raise
        finally:
            os.close(read_end)
        if self._proc is not None:
            proctree.adopt(self._proc.pid)
        if _group_log is not None:
            record = GroupRecord(
                pgid=pgid,
                start=leader.start if (leader := proctree.entry(pgid)) else None,
                boot=boot_id(),
                mark=held.mark if held is not None else None,
                cgroup=_relative_cgroup(cell),
                argv=tuple(str(a) for a in list(argv)[:8]),
            )
            with suppress(OSError), open_append_nofollow(_group_log) as handle:
                handle.write(json.dumps(record.to_json()) + "\n")

    def release(self) -> None:
        """The group has ended: let the watcher go without touching it."""
        with suppress(OSError):
            os.write(self._write, b"done\n")
        with suppress(OSError):
            os.close(self._write)
        if self._proc is not None:
            with suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            proctree.forget(self._proc.pid)


def boot_id() -> str | None:
    """This boot's id: a start time recorded in another boot says nothing about this one."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _relative_cgroup(cell: Cell | None) -> str | None:
    mount = cgroups.cgroup2_mount()
    if cell is None or mount is None or mount not in cell.path.parents:
        return None
    return str(cell.path.relative_to(mount))


def end_recorded_groups(path: Path) -> list[str]:
    """End what a dead run recorded in `path` and left alive; returns what was ended.

    Only what is provably the run's own is ended, whatever the record says (a command could
    have edited it): a cgroup only when it is one qualify made for a run; a process group only
    when its leader is alive with the very start time recorded, in the same boot; else only the
    processes that carry the command's mark in their environment."""
    if not path.is_file():
        return []
    ended: list[str] = []
    boot = boot_id()
    mount = cgroups.cgroup2_mount()
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        try:
            record = GroupRecord.read(jsontext.loads(line), f"{path}:{number}")
        except (ValueError, RunStoreError):  # jsontext.TooDeep included
            continue  # a line qualify did not write as it is names nothing to end
        if record.boot != boot:
            continue  # another boot (or a record without one): none of its processes is alive
        pgid, shown = record.pgid, shlex.join(record.argv) if record.argv is not None else "?"
        cell = cgroups.valid_recorded(record.cgroup, mount) if record.cgroup is not None else None
        if cell is not None:
            count = len(cell.pids())
            cell.kill()
            with suppress(OSError):
                cell.path.parent.rmdir()  # the dead run's own cgroup, once it holds no other
            if count:
                ended.append(f"group {pgid} ({shown}: {count} processes, by its cgroup)")
                continue
        pids = set(group_members(pgid, session=True)) if _leader_is(pgid, record.start) else set()
        if record.mark:
            pids |= proctree.marked(record.mark, proctree.table())
        if pids:
            proctree.end(pids, grace_s=0.0)
            ended.append(f"group {pgid} ({shown}: {len(pids)} processes)")
    path.unlink()
    return ended


def _leader_is(pgid: int, start: int | None) -> bool:
    """Whether the group's leader is alive and is the process recorded (same start time)."""
    leader = proctree.entry(pgid)
    return (
        start is not None
        and leader is not None
        and not leader.zombie
        and leader.pgid == pgid
        and leader.session == pgid
        and leader.start == start
    )


def group_members(pgid: int, *, session: bool = False, started_after: int | None = None) -> list[int]:
    """Live (non-zombie) processes of group `pgid`; with `session`, only those whose session is
    the group too (qualify starts each child as a session leader); with `started_after`, only
    those started at or after that many clock ticks after boot (a reused number is not ours)."""
    return [
        e.pid
        for e in proctree.table().values()
        if e.pgid == pgid
        and (not session or e.session == pgid)
        and (started_after is None or e.start >= started_after)
    ]


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in group `pgid` (zombies hold no resources)."""
    try:
        os.killpg(pgid, 0)  # no process at all, zombies included: the common case, asked cheaply
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return bool(group_members(pgid))
