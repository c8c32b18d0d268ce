"""Writing inside a run folder without following a link; the files only one process may hold.

A run folder can come from elsewhere (an archive, a copy, a hand) and a run's commands work
inside it, so any folder or file in it may be a symbolic link to somewhere else. qualify never
writes through one. While a run folder is written (`guarding`: its writer holds the lock, or a
report or a rejudgement writes into it), every folder made or entered below it is reached from
the run folder one component at a time, each opened with O_NOFOLLOW, and every file is created
with O_NOFOLLOW | O_EXCL then renamed into place (a rename replaces a link, never follows it),
or opened to append with O_NOFOLLOW. The run folder itself and the runs directory above it may
be reached through links (/tmp is one on some systems): only what is inside is checked. A run
set's members are folders inside the set's, so while a set is written everything is checked
from the set's folder.

The lock and the runs directory's counter are plain files (`open_plain_file`): made exclusively
or reused when an ended holder left one (flock went with that process), and refused when they
are a link, not a regular file, or a file with other names. A writer checks before each record
it saves that the lock path is still the file it holds (`check_writer`): a writer whose lock was
removed or replaced stops, rather than write beside a second writer the lock let in.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO, ClassVar

from qualify.core.errors import RunStoreError

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted where a file should be must not hang the open; it is refused after.
_EXISTING = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class LinkInRunError(RunStoreError):
    """A folder or file qualify would write inside a run folder is a symbolic link."""


class LockLostError(RunStoreError):
    """The lock a writer holds is no longer the file at the run's lock path."""


def link_error(link: Path, target: str, hint: str | None = None) -> LinkInRunError:
    return LinkInRunError(
        f"{link}: is a symbolic link (to {target}); "
        "qualify does not write through a link inside a run folder",
        hint
        or f"remove the link {link} (put a real folder or file there if the run needs what it points to), "
        "or start a new run",
    )


def write_hint(exc: OSError, path: Path) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"make {path.parent} writable, or copy the run to a writable folder and use that"
    return "free space or remove what is in the way"


def _cannot_write(path: Path, exc: OSError) -> RunStoreError:
    return RunStoreError(f"{path}: cannot write: {exc.strerror or exc}", write_hint(exc, path))


@dataclass(eq=False)
class HeldLock:
    """A run's lock as its writer holds it: the path, the open file and which file it is."""

    WHAT: ClassVar[str] = "the run's lock"

    path: Path
    fd: int
    device: int
    inode: int

    def check(self) -> None:
        """Raise LockLostError unless the lock path is still the file this writer holds."""
        hint = (
            "this run stopped and wrote nothing more, since another qualify may now be writing it; "
            f"once none is, resume it with `qualify run --run {self.path.parent}`"
        )
        try:
            now = os.lstat(self.path)
        except FileNotFoundError:
            raise LockLostError(
                f"{self.path}: {self.WHAT} was removed while this run was writing", hint
            ) from None
        except OSError as exc:
            raise LockLostError(f"{self.path}: {self.WHAT} cannot be checked: {exc}", hint) from None
        if (now.st_dev, now.st_ino) != (self.device, self.inode):
            raise LockLostError(
                f"{self.path}: {self.WHAT} was replaced by another file while this run was writing", hint
            )


@dataclass(eq=False)
class _Guard:
    #: The run folder as given (made absolute) and, when a link leads to it, as it really is.
    roots: tuple[Path, ...]
    lock: HeldLock | None


_guards: list[_Guard] = []
_guards_lock = threading.Lock()  # a check's threads write too


def _absolute(path: Path) -> Path:
    # Made absolute without resolving: a link on the way must stay visible to be refused.
    return Path(os.path.abspath(path))  # noqa: PTH100


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@contextmanager
def guarding(root: Path, lock: HeldLock | None = None) -> Iterator[None]:
    """While the block runs, every write below `root` (a run folder) through this module is
    checked for links; `lock`, when given, is checked at each record saved (`check_writer`)."""
    given, real = _absolute(root), Path(os.path.realpath(root))
    guard = _Guard((given,) if real == given else (given, real), lock)
    with _guards_lock:
        _guards.append(guard)
    try:
        yield
    finally:
        with _guards_lock:
            _guards.remove(guard)


def guard_root(path: Path) -> Path | None:
    """The outermost run folder being written that holds `path` (in the form `path` names it),
    or None when no run folder being written holds it."""
    here = _absolute(path)
    with _guards_lock:
        roots = [root for guard in _guards for root in guard.roots if _inside(here, root)]
    return min(roots, key=lambda root: len(root.parts), default=None)


def check_writer(path: Path) -> None:
    """Raise LockLostError when a lock this process holds over `path` was removed or replaced."""
    here = _absolute(path)
    with _guards_lock:
        held = [g.lock for g in _guards if g.lock is not None and any(_inside(here, r) for r in g.roots)]
    for lock in held:
        lock.check()


def _target(name: str, dir_fd: int) -> str:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return "somewhere unreadable"


def _open_below(root: Path, folder: Path, *, create: bool) -> int:
    """An open descriptor of `folder`, reached from `root` one component at a time, each made
    first when `create` and missing; a component that is a link or not a folder is refused.
    Other failures are OSError (FileNotFoundError: a component is missing and not made)."""
    parts = _absolute(folder).relative_to(root).parts
    fd = os.open(root, _FOLDER)
    here = root
    try:
        for part in parts:
            here = here / part
            if create:
                with suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
            try:
                child = os.open(part, _FOLDER | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                info = None
                with suppress(OSError):
                    info = os.stat(part, dir_fd=fd, follow_symlinks=False)
                if info is not None and stat.S_ISLNK(info.st_mode):
                    raise link_error(here, _target(part, fd)) from None
                if info is not None and not stat.S_ISDIR(info.st_mode):
                    raise RunStoreError(
                        f"{here}: is not a folder; qualify keeps a folder there", "remove what is in the way"
                    ) from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_folder(folder: Path, *, create: bool = True) -> int:
    """An open descriptor of `folder` (made with its parents when `create`), reached without a
    link below the run folder being written that holds it. OSError as `_open_below`."""
    root = guard_root(folder)
    if root is not None:
        return _open_below(root, folder, create=create)
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return os.open(folder, _FOLDER)


def ensure_folder(path: Path) -> Path:
    """`path`, made as a folder where missing (with its parents), and never a link inside the
    run folder being written that holds it."""
    try:
        os.close(open_folder(path))
    except OSError as exc:
        raise RunStoreError(
            f"{path}: cannot make the folder: {exc.strerror or exc}", write_hint(exc, path)
        ) from None
    return path


def write_file_atomic(path: Path, fill: Callable[[BinaryIO], object]) -> None:
    """Write `path` so that it holds either the old or the new content, never a mix: `fill`
    writes a new file beside it, which is flushed to disk and renamed over `path`."""
    try:
        dir_fd = open_folder(path.parent)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        for _ in range(8):
            temporary = f".{path.name}.{secrets.token_hex(4)}.tmp"
            try:
                # Made new, never through a link; the umask gives it a report's usual mode.
                fd = os.open(temporary, _NEW_FILE, 0o666, dir_fd=dir_fd)
                break
            except FileExistsError:
                continue
            except OSError as exc:
                raise _cannot_write(path, exc) from None
        else:
            raise RunStoreError(f"{path}: cannot write: no free temporary name beside it")
        try:
            with os.fdopen(fd, "wb") as handle:
                fill(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError as exc:
            # A full disk or a folder in the way: the old content stays, the message names it.
            with suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise _cannot_write(path, exc) from None
        except BaseException:
            with suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)


def open_append_nofollow(path: Path, *, errors: str | None = None) -> IO[str]:
    """`path` opened to append UTF-8 text (made where missing, with its folder): never through
    a link, neither `path` itself nor, inside a run folder being written, a folder on the way.
    A log of a command is opened here."""
    try:
        dir_fd = open_folder(path.parent)
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    try:
        fd = os.open(path.name, _APPEND, 0o666, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_error(path, _target(path.name, dir_fd)) from None
        raise _cannot_write(path, exc) from None
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunStoreError(
            f"{path}: is not a regular file; qualify appends to one", "remove what is in the way"
        )
    return os.fdopen(fd, "a", encoding="utf-8", errors=errors)


def open_plain_file(path: Path, what: str) -> int:
    """`path` (`what` it is, for messages) open to read and write: made exclusively when
    missing, else the file there, which must be a regular file of one name and no link (a
    lock's or counter's bytes are rewritten: through a link or a second name they would land
    outside). OSError for what the file system refuses."""
    again = f"remove {path} (qualify makes a new one) and run again"
    dir_fd = open_folder(path.parent, create=False)
    try:
        for _ in range(8):
            try:
                flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(path.name, flags, 0o666, dir_fd=dir_fd)
                break
            except FileExistsError:
                pass
            try:
                fd = os.open(path.name, _EXISTING, dir_fd=dir_fd)
                break
            except FileNotFoundError:
                continue  # removed between the two opens: made anew
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise link_error(path, _target(path.name, dir_fd), again) from None
                if exc.errno == errno.EISDIR:
                    raise RunStoreError(f"{path}: {what} is not a regular file (a folder)", again) from None
                raise
        else:
            raise RunStoreError(f"{path}: {what} keeps disappearing", "stop what removes it, and run again")
    finally:
        os.close(dir_fd)
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = f"{what} is not a regular file"
    elif info.st_nlink != 1:
        problem = f"{what} has other names (hard links): it may be a file outside the run"
    if problem is not None:
        os.close(fd)
        raise RunStoreError(f"{path}: {problem}", again)
    return fd


def same_file(path: Path, fd: int) -> bool:
    """Whether `path` (not followed) is the file open as `fd`."""
    try:
        now = os.lstat(path)
    except OSError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
