"""Process groups that end with qualify: a watcher per group, and the record a resume reads.

Every child of qualify runs in its own process group (`qualify.core.process`). qualify ends
those groups on every exit it sees (a timeout, Ctrl-C, SIGTERM); these pieces cover the exits it
does not see: a SIGKILL of qualify itself, or a machine that dies under it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

#: Seconds between SIGTERM and SIGKILL when a watcher ends a group.
KILL_GRACE_S = 5.0


# A watcher per process group, so that the group ends even when qualify is killed with SIGKILL
# (no handler runs then, and PR_SET_PDEATHSIG would reach only the direct child, not the
# grandchildren under a check's `/bin/sh -c`). The watcher is a shell in its own session that
# blocks reading a pipe only qualify holds open: "done" means the group already ended; end of
# file without it means qualify died, and the watcher ends the group (TERM, then KILL).
_WATCHER = (
    'read -r said; [ "$said" = done ] && exit 0; '
    'kill -TERM -"$1" 2>/dev/null || exit 0; sleep "$2"; kill -KILL -"$1" 2>/dev/null; exit 0'
)

#: Where the run records the process groups it starts (one JSON line each), so that a resume
#: can end what a dead run left behind; None outside a run.
_group_log: Path | None = None


@contextmanager
def recording_groups(path: Path) -> Iterator[None]:
    """Record every process group started inside the block in `path`."""
    global _group_log  # noqa: PLW0603  (one run per process; set and restored here only)
    before, _group_log = _group_log, path
    try:
        yield
    finally:
        _group_log = before


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (/proc/PID/stat field 22)."""
    try:
        return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


class GroupWatch:
    """The watcher of one process group (see _WATCHER)."""

    def __init__(self, pgid: int, argv: Sequence[str]) -> None:
        read_end, self._write = os.pipe()
        self._proc = None
        try:
            self._proc = subprocess.Popen(
                ["/bin/sh", "-c", _WATCHER, "qualify-watch", str(pgid), str(KILL_GRACE_S)],
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
        if _group_log is not None:
            record = {"pgid": pgid, "start": _start_time(pgid), "argv": list(argv)[:8]}
            with suppress(OSError), _group_log.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")

    def release(self) -> None:
        """The group has ended: let the watcher go without touching it."""
        with suppress(OSError):
            os.write(self._write, b"done\n")
        with suppress(OSError):
            os.close(self._write)
        if self._proc is not None:
            with suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)


def end_recorded_groups(path: Path) -> list[str]:
    """End the process groups a dead run recorded in `path` that are still alive (a group is
    matched by its number, its session and a start no earlier than the recorded one, so a
    number reused since is left alone); returns what was ended."""
    if not path.is_file():
        return []
    ended: list[str] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
            pgid, start = int(record["pgid"]), record.get("start")
        except (ValueError, KeyError, TypeError):
            continue
        members = group_members(pgid, session=True, started_after=start if isinstance(start, int) else None)
        if members:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            ended.append(f"group {pgid} ({shlex.join(record.get('argv') or [])}: {len(members)} processes)")
    path.unlink()
    return ended


def group_members(pgid: int, *, session: bool = False, started_after: int | None = None) -> list[int]:
    """Live (non-zombie) processes of group `pgid`; with `session`, only those whose session is
    the group too (qualify starts each child as a session leader); with `started_after`, only
    those started at or after that many clock ticks after boot (a reused number is not ours)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # After the parenthesised command: state ppid pgrp session ... starttime (index 19).
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid or fields[0] == "Z":
                continue
            if session and int(fields[3]) != pgid:
                continue
            if started_after is not None and int(fields[19]) < started_after:
                continue
        except (OSError, IndexError, ValueError):
            continue
        members.append(int(entry.name))
    return members


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in group `pgid` (zombies hold no resources)."""
    try:
        os.killpg(pgid, 0)  # no process at all, zombies included: the common case, asked cheaply
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return bool(group_members(pgid))
