"""Who checked commands run as: never with qualify's own privilege.

qualify is documented to run as root (nix's single-user store, cgroups, the GPU's counters).
A command it checks (an engine's test, server or benchmark) is not trusted with that: when
qualify is root, every command runs as another user (`QUALIFY_COMMAND_USER`, by default
`nobody`, uid and gid 65534), with no capabilities (inheritable, ambient and bounding sets
cleared) and `no_new_privs` (a setuid program gives it nothing back), through util-linux's
`setpriv`. As that user a command cannot write the run's records (they are qualify's, mode
0644), its cgroup's or the root cgroup's `cgroup.procs`, `/proc/sys`, nor trace, signal or enter
qualify's processes. Its supplementary groups are the groups of the GPU device nodes
(`/dev/kfd`, `/dev/dri/*`, `/dev/nvidia*`), so the GPU stays usable.

The one exception is nix (`qualify.build.nix`, asked for as `privileged`): a single-user store is
written by its owner, so nix runs as qualify's user, and the builders of a flake's derivations
run as that user too. The README's trust section says what that leaves open.

The check's own folder is the only part of the run a command writes: its folders are given to
the command's user before each command (`hand_over`) and taken back, every file in them, when
the check's commands have ended (`take_back`), so that no later check can change them.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from qualify.core.errors import QualifyError, UsageError

ENV = "QUALIFY_COMMAND_USER"
#: `nobody` and `nogroup` on Debian and most distributions; by number, so that a host whose
#: nobody is missing from /etc/passwd still gets a user that owns nothing.
DEFAULT_ID = 65534
#: Device nodes a GPU is reached through: their groups become the command's.
GPU_NODES = ("/dev/kfd", "/dev/dri/*", "/dev/nvidia*", "/dev/nvidia-caps/*")


@dataclass(frozen=True)
class CommandUser:
    """The user and groups checked commands run as, and how they get there."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    #: setpriv's argv prefix dropping to this user (empty: commands keep qualify's user).
    drop: tuple[str, ...]
    #: How commands run, in words, for run.json and the report.
    words: str
    #: What this leaves open, in words (None: nothing the host could have given).
    missing: str | None

    @property
    def switched(self) -> bool:
        return self.uid != os.geteuid()


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _parse(raw: str) -> tuple[int, int]:
    """`NAME`, `UID` or `UID:GID` as a uid and gid; a user that does not exist is refused."""
    hint = f"{ENV} is a user name, a uid, or uid:gid (unset: nobody, {DEFAULT_ID}:{DEFAULT_ID})"
    user, _, group = raw.strip().partition(":")
    if user.isdigit():
        uid = int(user)
        try:
            gid = pwd.getpwuid(uid).pw_gid
        except KeyError:
            gid = uid
    else:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise UsageError(f"{ENV}={raw!r}: no user {user!r} on this host", hint) from None
        uid, gid = entry.pw_uid, entry.pw_gid
    if group:
        if group.isdigit():
            gid = int(group)
        else:
            try:
                gid = grp.getgrnam(group).gr_gid
            except KeyError:
                raise UsageError(f"{ENV}={raw!r}: no group {group!r} on this host", hint) from None
    return uid, gid


def gpu_groups() -> tuple[int, ...]:
    """The groups that may open the GPU's device nodes (never root's group: a command given
    group 0 could write whatever root's group may)."""
    found: set[int] = set()
    for pattern in GPU_NODES:
        folder, _, glob = pattern.rpartition("/")
        for node in Path(folder).glob(glob):
            with suppress(OSError):
                info = node.stat()
                if stat.S_ISCHR(info.st_mode) and info.st_gid != 0 and info.st_mode & 0o060:
                    found.add(info.st_gid)
    return tuple(sorted(found))


def chosen_user() -> CommandUser:
    """The user checked commands run as (see the module's docstring); a `QUALIFY_COMMAND_USER`
    that names no user, or another user where qualify is not root, is refused."""
    raw = os.environ.get(ENV)
    me = os.geteuid()
    if me != 0:
        if raw and _parse(raw)[0] != me:
            raise UsageError(
                f"{ENV}={raw!r}: only root can run commands as another user (qualify runs as {_name(me)})",
                f"unset {ENV}, or run qualify as root",
            )
        setpriv = shutil.which("setpriv")
        kept: tuple[str, ...] = (setpriv, "--no-new-privs", "--") if setpriv else ()
        words = f"as qualify's own user ({_name(me)}): qualify is not root, so it cannot give them another"
        return CommandUser(me, os.getegid(), (), kept, words, "a user of their own (qualify is not root)")
    uid, gid = _parse(raw) if raw else (DEFAULT_ID, DEFAULT_ID)
    if uid == 0:
        words = f"as root, with every capability ({ENV}={raw})"
        return CommandUser(0, 0, (), (), words, f"an unprivileged user ({ENV}={raw} keeps root)")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        words = "as root: setpriv (util-linux) is not installed, so qualify cannot drop their privileges"
        return CommandUser(0, 0, (), (), words, "an unprivileged user (setpriv is not installed)")
    groups = gpu_groups()
    drop = (
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid}",
        f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups",
        "--inh-caps=-all",
        "--ambient-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    )
    named = ", ".join(f"{_group(g)} ({g})" for g in groups)
    words = (
        f"as {_name(uid)} (uid {uid}, gid {gid}{', GPU groups ' + named if groups else ''}), "
        "with no capabilities and no_new_privs"
    )
    return CommandUser(uid, gid, groups, drop, words, None)


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"


def unreachable(user: CommandUser, folder: Path) -> Path | None:
    """The first folder on the way to `folder` that `user` cannot search (None: it can reach
    it), by the folders' owners and modes."""
    if not user.switched:
        return None
    groups = {user.gid, *user.groups}
    for step in [*reversed(folder.resolve().parents), folder.resolve()]:
        try:
            info = step.stat()
        except FileNotFoundError:
            return None  # made by qualify when it is needed, searchable by all
        except OSError:
            return step
        if info.st_uid == user.uid:
            bit = 0o100
        elif info.st_gid in groups:
            bit = 0o010
        else:
            bit = 0o001
        if not info.st_mode & bit:
            return step
    return None


def require_reachable(user: CommandUser, *folders: Path) -> None:
    """Refuse, before anything runs, folders the command user cannot reach: every command would
    fail on them with a bare "permission denied"."""
    for folder in folders:
        blocked = unreachable(user, folder)
        if blocked is not None:
            raise QualifyError(
                f"checked commands run {user.words}, and cannot reach {folder}: "
                f"{blocked} is not searchable by that user",
                f"keep the project and its runs directory where that user can read them (chmod o+x "
                f"{blocked}, or move them), or set {ENV} to a user who can",
            )


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


def hand_over(user: CommandUser, folder: Path) -> None:
    """Let `user` write in `folder` and every folder below it: each folder qualify made is
    given to the user, and each named pipe qualify made there for a command to write into (a
    streamed numerics role's). Only folders (opened without following a link, so never
    anything a link or a hard link leads to) and pipes, never a file: a file qualify wrote
    stays qualify's; a pipe holds nothing of qualify's to give away."""
    if not user.switched or not folder.is_dir():
        return
    top = os.open(folder, _DIR_FLAGS)
    try:
        _give(top, user)
    finally:
        os.close(top)
    me = os.geteuid()
    for _path, dirs, files, dirfd in os.fwalk(folder, follow_symlinks=False):
        for name in dirs:
            with suppress(OSError):
                fd = os.open(name, _DIR_FLAGS, dir_fd=dirfd)
                try:
                    _give(fd, user)
                finally:
                    os.close(fd)
        for name in files:
            with suppress(OSError):
                # Never opened: opening a pipe waits for its other end.
                info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if stat.S_ISFIFO(info.st_mode) and info.st_uid == me:
                    os.chown(name, user.uid, user.gid, dir_fd=dirfd, follow_symlinks=False)


def _give(fd: int, user: CommandUser) -> None:
    info = os.fstat(fd)
    if info.st_uid != user.uid:
        os.fchown(fd, user.uid, user.gid)
    if info.st_mode & 0o700 != 0o700:
        os.fchmod(fd, stat.S_IMODE(info.st_mode) | 0o700)


def take_back(user: CommandUser, folder: Path) -> None:
    """Make everything in `folder` qualify's again, once no command of the check is left: what
    the command's user owns becomes qualify's, and nothing qualify owns there stays writable by
    anyone else, set-user-id or set-group-id. A file of a third user (a hard link, where the host
    allows linking others' files) is left as it is: it was never the command's to give."""
    if not user.switched or not folder.is_dir():
        return
    me, mine = os.geteuid(), os.getegid()
    top = os.open(folder, _DIR_FLAGS)
    try:
        _reclaim_fd(top, user, me, mine)
    finally:
        os.close(top)
    for _path, dirs, files, dirfd in os.fwalk(folder, follow_symlinks=False):
        for name in [*dirs, *files]:
            with suppress(OSError):
                info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    if info.st_uid == user.uid:
                        os.chown(name, me, mine, dir_fd=dirfd, follow_symlinks=False)
                    continue
                if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                    # A FIFO or a socket: taken from the user, left unopened.
                    if info.st_uid == user.uid:
                        os.chown(name, me, mine, dir_fd=dirfd, follow_symlinks=False)
                        kept_mode = stat.S_IMODE(info.st_mode) & 0o755
                        os.chmod(name, kept_mode, dir_fd=dirfd, follow_symlinks=False)
                    continue
                fd = os.open(name, _DIR_FLAGS if stat.S_ISDIR(info.st_mode) else _FILE_FLAGS, dir_fd=dirfd)
                try:
                    _reclaim_fd(fd, user, me, mine)
                finally:
                    os.close(fd)


def _reclaim_fd(fd: int, user: CommandUser, me: int, mine: int) -> None:
    info = os.fstat(fd)
    if info.st_uid == user.uid:
        os.fchown(fd, me, mine)
    elif info.st_uid != me:
        return
    mode = stat.S_IMODE(info.st_mode)
    kept = mode & ~(stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | 0o022)
    if kept != mode or info.st_uid == user.uid:
        os.fchmod(fd, kept)


def lend(user: CommandUser, folder: Path, keep: str) -> None:
    """Give a folder qualify made outside the run (a clone a command edits) to `user`: every
    file and folder below it but `keep` (its `.git`), the folder itself writable by all and
    sticky (so that `keep`, qualify's, can be neither renamed nor removed), and the folder above
    it searchable. A file of more than one name is not given: it would give its other names."""
    if not user.switched:
        return
    folder.parent.chmod(stat.S_IMODE(folder.parent.stat().st_mode) | 0o711)
    folder.chmod(0o1777)
    for path, dirs, files, dirfd in os.fwalk(folder, follow_symlinks=False):
        if Path(path) == folder and keep in dirs:
            dirs.remove(keep)
        for name in [*dirs, *files]:
            if Path(path) == folder and name == keep:
                continue
            with suppress(OSError):
                info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    os.chown(name, user.uid, user.gid, dir_fd=dirfd, follow_symlinks=False)
                elif stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink == 1):
                    fd = os.open(
                        name, _DIR_FLAGS if stat.S_ISDIR(info.st_mode) else _FILE_FLAGS, dir_fd=dirfd
                    )
                    try:
                        _give(fd, user)
                    finally:
                        os.close(fd)


def returned(user: CommandUser, folder: Path, keep: str) -> list[Path]:
    """Take back what `lend` gave, once the command has ended; the entries named `keep` the
    command made below the folder (a `.git` where a repository would be found before qualify's
    own): the caller refuses to go on with them."""
    if not user.switched:
        return []
    take_back(user, folder)
    folder.chmod(0o755)
    return [p for p in folder.rglob(keep) if p != folder / keep]
