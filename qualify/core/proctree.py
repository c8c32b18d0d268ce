"""The process tree, for hosts where qualify cannot make a cgroup: what a command started,
found from /proc, and ended.

Three ways keep hold of a command's processes without a cgroup:
- its descendants, by their parent links, while the links hold;
- a mark in its environment (`QUALIFY_RUN=<run>.<command>`), which every process it starts
  inherits, whatever session or group it moves to;
- qualify is a child subreaper (PR_SET_CHILD_SUBREAPER): a process that double forks to leave
  its parent is re-parented to qualify, not to init, and is ended with the run.
A process that clears its environment and outlives its parent's tree is found only by the last,
at the end of the run: that is the limit of this fallback (a cgroup has none).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

MARK = "QUALIFY_RUN"
_PR_SET_CHILD_SUBREAPER = 36
#: Live children qualify started itself (commands' leaders, watchers): never taken for orphans.
_own: set[int] = set()


def become_subreaper() -> bool:
    """Make this process the one orphans of its descendants are re-parented to."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def adopt(pid: int) -> None:
    _own.add(pid)


def forget(pid: int) -> None:
    _own.discard(pid)


@dataclass(frozen=True)
class Entry:
    pid: int
    ppid: int
    pgid: int
    session: int
    start: int  # clock ticks after boot
    zombie: bool


def entry(pid: int) -> Entry | None:
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return Entry(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), fields[0] == "Z")
    except (OSError, IndexError, ValueError):
        return None


def table() -> dict[int, Entry]:
    out: dict[int, Entry] = {}
    for path in Path("/proc").iterdir():
        if path.name.isdigit() and (found := entry(int(path.name))) is not None and not found.zombie:
            out[found.pid] = found
    return out


def descendants(root: int, procs: dict[int, Entry]) -> set[int]:
    children: dict[int, list[int]] = {}
    for e in procs.values():
        children.setdefault(e.ppid, []).append(e.pid)
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def carries(pid: int, mark: str) -> bool:
    """Whether the process was started with `QUALIFY_RUN=<mark>` (exactly) in its environment."""
    try:
        environ = (Path("/proc") / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"{MARK}={mark}".encode() in environ.split(b"\0")


def marked(mark: str, procs: dict[int, Entry]) -> set[int]:
    return {pid for pid in procs if pid != os.getpid() and carries(pid, mark)}


def orphans(procs: dict[int, Entry]) -> set[int]:
    """Processes re-parented to qualify (as subreaper) that it did not start itself."""
    me = os.getpid()
    return {e.pid for e in procs.values() if e.ppid == me and e.pid not in _own}


def end(pids: set[int], grace_s: float) -> None:
    """TERM, then KILL after `grace_s`, the processes `pids` that are still alive; reap those
    that were re-parented to qualify."""
    for signum, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 1.0)):
        alive = {p for p in pids if _running(p)}
        if not alive:
            break
        for pid in alive:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(_running(p) for p in alive):
            time.sleep(0.02)
    reap(pids)


def _running(pid: int) -> bool:
    found = entry(pid)
    return found is not None and not found.zombie


def reap(pids: set[int]) -> None:
    for pid in pids:
        if pid in _own:
            continue
        with suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def end_command(leader: int, mark: str | None, grace_s: float) -> None:
    """End what a command left: its leader's descendants and every process carrying its mark."""
    procs = table()
    pids = descendants(leader, procs) | (marked(mark, procs) if mark else set())
    pids.discard(leader)  # the leader is the caller's to end and wait for
    pids.discard(os.getpid())
    if pids:
        end(pids, grace_s)
