"""Control groups (cgroup v2) as process containers, the way systemd contains a service.

A process cannot leave its cgroup by starting a session, double forking or changing its group,
so a cgroup per command holds every descendant the command ever had; `cgroup.kill` ends them
all at once. qualify uses one where the host lets it create cgroups below its own (root, or a
delegated subtree as systemd gives a user service with `Delegate=yes`); elsewhere it falls back
to the process tree (`qualify.core.proctree`).
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

#: A cgroup qualify made: `qualify-<run>-<pid>` for a run, `cmd-<n>` below it for a command.
RUN_CGROUP = re.compile(r"^qualify-[A-Za-z0-9._+-]+-\d+$")
COMMAND_CGROUP = re.compile(r"^cmd-\d+$")


def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `.../unified` on a
    hybrid host), from the mount table."""
    try:
        table = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in table.splitlines():
        head, _, tail = line.partition(" - ")
        if tail.split(" ", 1)[0] == "cgroup2":
            return Path(head.split()[4])
    return None


def own_cgroup() -> Path | None:
    """The cgroup v2 folder this process is in, or None where there is none."""
    mount = cgroup2_mount()
    if mount is None:
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            path = mount / line[3:].strip().lstrip("/")
            return path if path.is_dir() else None
    return None


@dataclass(frozen=True)
class Cell:
    """One cgroup qualify created: a run's, or a command's below it."""

    path: Path

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def child(self, name: str) -> Cell:
        (self.path / name).mkdir()
        return Cell(self.path / name)

    def pids(self) -> list[int]:
        """Every process in the cell and below it."""
        found: list[int] = []
        for procs in [self.procs, *self.path.glob("*/cgroup.procs")]:
            with suppress(OSError, ValueError):
                found += [int(p) for p in procs.read_text().split()]
        return found

    def cpu_s(self) -> float | None:
        """CPU seconds of everything that ever ran in the cell and below it (`usage_usec` of
        cpu.stat, which cgroup v2 keeps for every cgroup, with or without the cpu controller);
        a removed sub-cell's time stays in it. None where it cannot be read."""
        try:
            for line in (self.path / "cpu.stat").read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def populated(self) -> bool:
        try:
            events = (self.path / "cgroup.events").read_text()
        except OSError:
            return False
        return "populated 1" in events

    def signal(self, signum: int) -> None:
        for pid in self.pids():
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    def kill(self, wait_s: float = 5.0) -> None:
        """SIGKILL everything in the cell (its sub-cells too), wait until it is empty, and remove
        it. Nothing in it can escape: a fork during the kill lands in the same cell."""
        if not self.path.is_dir():
            return
        with suppress(OSError):
            (self.path / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + wait_s
        while self.populated() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.remove()

    def remove(self) -> None:
        for sub in sorted(self.path.glob("*/"), reverse=True):
            if (sub / "cgroup.procs").is_file():
                Cell(sub).remove()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    return
                time.sleep(0.02)  # a killed process leaves its cgroup a moment after it exits


def entering(cell: Cell) -> list[str]:
    """The argv prefix that moves a command into `cell` before it runs: a shell writes its own
    pid into `cgroup.procs`, then execs the command. Moving the child after it starts would
    leave a window in which it could fork a process outside the cell."""
    script = 'echo 0 > "$0" || { echo "qualify: cannot enter the cgroup $0" >&2; exit 125; }; exec "$@"'
    return ["/bin/sh", "-c", script, str(cell.procs)]


def run_cell(run_id: str) -> tuple[Cell | None, str]:
    """A new cgroup for a run below this process's own, proven usable by moving a probe into it;
    (None, why) where the host does not allow it."""
    own = own_cgroup()
    if own is None:
        return None, "no cgroup v2 hierarchy is mounted"
    _sweep(own)
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", run_id)[:80] or "run"
    try:
        cell = Cell(own / f"qualify-{safe}-{os.getpid()}")
        cell.path.mkdir(exist_ok=True)
    except OSError as exc:
        return None, f"cannot create a cgroup in {own}: {exc.strerror or exc}"
    # The root cgroup has no cgroup.kill of its own; the ones made below it do, from Linux 5.14.
    if not (cell.path / "cgroup.kill").is_file():
        cell.remove()
        return None, f"a cgroup in {own} has no cgroup.kill (Linux 5.14 or newer is needed)"
    try:
        probe = cell.child("cmd-0")
        done = subprocess.run([*entering(probe), "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        cell.remove()
        return None, f"cannot use a cgroup in {own}: {exc}"
    probe.remove()
    if done.returncode != 0:
        cell.remove()
        return None, f"cannot move a process into a cgroup in {own} (delegate it, or run as root)"
    return cell, f"cgroup v2 ({cell.path})"


def _sweep(own: Path) -> None:
    """Remove the empty cgroups that qualify processes which died (SIGKILL) left here: a run's
    cgroup ends in its qualify's pid. One that still holds processes is left for its run's
    resume to end and name."""
    for folder in own.glob("qualify-*"):
        pid = folder.name.rsplit("-", 1)[-1]
        if RUN_CGROUP.match(folder.name) and pid.isdigit() and not Path(f"/proc/{pid}").exists():
            cell = Cell(folder)
            if not cell.populated():
                cell.remove()


def valid_recorded(path: str, mount: Path | None) -> Cell | None:
    """A command's cgroup as a dead run recorded it, when it is provably one qualify made
    (`<mount>/…/qualify-<run>-<pid>/cmd-<n>`): a record that names another cgroup is ignored, so
    an edited record cannot make a resume kill someone else's processes."""
    if mount is None:
        return None
    candidate = Path(os.path.normpath(mount / path.lstrip("/")))
    if mount not in candidate.parents or ".." in Path(path).parts:
        return None
    if not (COMMAND_CGROUP.match(candidate.name) and RUN_CGROUP.match(candidate.parent.name)):
        return None
    return Cell(candidate) if candidate.is_dir() else None
