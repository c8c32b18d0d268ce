"""The namespaces a checked command runs in: its own PID namespace (with its own /proc and
cgroup namespace), and, where chosen, a mount namespace in which the run folder is read-only.

bubblewrap (`bwrap`) makes both: `/` as it is (devices included, so the GPU's nodes stay
usable; the network as it is, so servers listen on loopback), a new PID namespace with a /proc
that shows only the command's processes, a cgroup namespace rooted at the command's cgroup (it
cannot move itself above it), the run folder bound read-only but for the check's own folder,
and the folder of qualify's seal key covered by an empty tmpfs. Where the mount namespace is
not chosen (`QUALIFY_CONTAINMENT` without `mount`) or bubblewrap cannot make one, util-linux's
`unshare` gives the command the PID and cgroup namespaces (in a user namespace of its own where
qualify is not root) without the read-only run folder; where neither can, none, and the run
says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_OWN_PID = "in a PID namespace of their own"
_BWRAP_NAMESPACES = ("--unshare-pid", "--unshare-cgroup-try")
#: A /proc of the command's PID namespace mounted by the box's first process, as root, rather
#: than by bubblewrap. bubblewrap covers parts of the /proc it mounts (sys, sysrq-trigger, irq,
#: bus) with read-only binds, and the kernel lets a user namespace mount a new /proc only where
#: one is wholly visible: a command that starts bubblewrap itself (a toolchain root entered with
#: it) could not. Used where commands run as another, unprivileged user, for whom /proc/sys is
#: read-only by its owner and mode; a command that keeps root keeps bubblewrap's covers.
_OWN_PROC = '{mount} -t proc -o nosuid,nodev,noexec proc /proc && exec "$@"'


@dataclass(frozen=True)
class Sandbox:
    """What the host gave: the argv prefix for every command, and what it holds, in words."""

    root: Path
    #: bubblewrap's path, when it makes the namespaces.
    bwrap: str | None
    read_only: bool
    hidden: tuple[Path, ...]
    #: unshare's argv, when it makes the PID namespace instead of bubblewrap.
    unshare: tuple[str, ...]
    records: str
    namespace: str
    missing: tuple[str, ...]

    def prefix(self, writable: Sequence[Path], *, own_proc: bool = False) -> list[str]:
        """The words that start a command in the namespaces, `writable` its folders that stay
        writable under a read-only run folder. `own_proc`: the command drops to an unprivileged
        user, and its /proc is mounted whole (`_OWN_PROC`), so that it may nest namespaces."""
        if self.bwrap is None:
            return list(self.unshare)
        words = [self.bwrap, "--dev-bind", "/", "/", *_BWRAP_NAMESPACES]
        if not own_proc:
            words += ["--proc", "/proc"]
        if self.read_only:
            words += ["--ro-bind", str(self.root), str(self.root)]
            for folder in writable:
                words += ["--bind", str(folder), str(folder)]
        for folder in self.hidden:
            words += ["--tmpfs", str(folder)]
        words += ["--die-with-parent", "--"]
        if own_proc:
            # The absolute paths qualify found, never the command's PATH (the plan's).
            words += ["/bin/sh", "-c", _OWN_PROC.format(mount=_mount()), "qualify-proc"]
        return words


@functools.cache
def _mount() -> str:
    """util-linux's mount, looked up once: every command's prefix names it."""
    return shutil.which("mount") or "/bin/mount"


def _tried(argv: Sequence[str]) -> str | None:
    """None when `argv` ran and exited 0, else why not."""
    try:
        done = subprocess.run(list(argv), capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no reason given"]
        return said[0]
    return None


def _unshare() -> tuple[tuple[str, ...], str | None]:
    found = shutil.which("unshare")
    if found is None:
        return (), "util-linux's unshare is not installed"
    own = () if os.geteuid() == 0 else ("--user", "--map-current-user")
    argv = (found, *own, "--pid", "--fork", "--kill-child", "--mount-proc", "--cgroup", "--")
    why = _tried([*argv, "true"])
    return (argv, None) if why is None else ((), f"unshare cannot make one here ({why})")


def probe(
    root: Path,
    *,
    read_only: bool,
    hidden: Sequence[Path],
    unprivileged: Sequence[str],
    own_proc: bool = False,
) -> Sandbox:
    """The strongest namespaces the host gives commands of the run in `root`, proven by starting
    one (as the command's user, `unprivileged` its prefix; `own_proc` as `Sandbox.prefix` takes
    it) before any command needs them.
    `read_only` (the `mount` of QUALIFY_CONTAINMENT): bubblewrap, else unshare's namespaces."""
    hidden = tuple(h for h in hidden if h.is_dir())
    why = "mount not chosen (QUALIFY_CONTAINMENT)"
    bwrap = shutil.which("bwrap") if read_only else None
    if read_only and bwrap is None:
        why = "bubblewrap (bwrap) is not installed"
    if bwrap is not None:
        box = Sandbox(root, bwrap, True, hidden, (), "", "", ())
        failed = _tried([*box.prefix([], own_proc=own_proc), *unprivileged, "true"])
        if failed is None:
            records = (
                f"read-only mount (bubblewrap): {root} read-only to commands but for their check's folder"
            )
            return Sandbox(root, bwrap, True, hidden, (), records, f"{_OWN_PID} (bubblewrap)", ())
        why = f"bubblewrap cannot make namespaces here ({failed})"
    records = f"sealed: {why}" + (", so commands can write the run folder" if read_only else "")
    missing = [f"a read-only run folder ({why})"]
    unshare, not_unshare = _unshare()
    if unshare:
        return Sandbox(root, None, False, (), unshare, records, f"{_OWN_PID} (unshare)", tuple(missing))
    missing.append(f"a PID namespace ({not_unshare})")
    seen = "no PID namespace: they see qualify's processes"
    return Sandbox(root, None, False, (), (), records, seen, tuple(missing))
