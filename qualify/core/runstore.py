"""The run directory: layout, atomic JSON files with `schema_version`, the writer lock.

runs/.sequence                           the number of the last run made here (`new_run`)
runs/<run-id>/run.json
runs/<run-id>/lock                       held (flock) by the one process writing the run
runs/<run-id>/gcroots/<role>
runs/<run-id>/<NN-stage>/stage.json
runs/<run-id>/<NN-stage>/<check>/{result.json, <role>/..., logs/}
runs/<run-id>/<NN-stage>/attempts/<n>/   earlier attempts, moved aside, never deleted
runs/<run-id>/report.html  summary.md  report.json

run.json, stage.json and result.json (the run folder's records) are versioned together, at
RECORD_VERSION; every other JSON file qualify writes is at SCHEMA_VERSION. What each record
version holds, and how an older one is read, is `qualify.records.migrations`.

Nothing is written through a link inside a run folder, and the lock is never followed through
one (`qualify.core.runfolder`).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qualify.core import jsontext, runfolder
from qualify.core.errors import RunStoreError
from qualify.core.runfolder import (
    LinkInRunError,
    LockLostError,
    check_writer,
    ensure_folder,
    guard_root,
    guarding,
    open_append_nofollow,
)

if TYPE_CHECKING:
    import pandas as pd

#: The version of every JSON file qualify writes other than the records (and of the report).
SCHEMA_VERSION = 1
#: The version of the run folder's records, run.json, stage.json and result.json (and the copy
#: of a first result.json that a rejudgement keeps): `qualify.records.migrations`.
RECORD_VERSION = 3
RECORDS = frozenset({"run.json", "stage.json", "result.json", "result.measured.json"})

__all__ = [
    "RECORDS",
    "RECORD_VERSION",
    "SCHEMA_VERSION",
    "LinkInRunError",
    "LockLostError",
    "RunDir",
    "check_writer",
    "ensure_folder",
    "newest_version",
    "now_iso",
    "open_append_nofollow",
    "read_json",
    "write_atomic",
    "write_json",
    "write_parquet",
]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` so that `path` holds either the old or the new content, never a mix.

    The bytes go to a new file in the same directory, are flushed to disk, then renamed over
    `path` (rename is atomic within one file system). Inside a run folder being written, no
    folder on the way is a link (`qualify.core.runfolder`).
    """
    runfolder.write_file_atomic(path, lambda handle: handle.write(data))


def newest_version(path: Path) -> int:
    """The newest `schema_version` this qualify reads in a file named like `path`."""
    return RECORD_VERSION if path.name in RECORDS else SCHEMA_VERSION


def write_json(path: Path, payload: dict[str, Any], *, version: int = SCHEMA_VERSION) -> None:
    """Atomically write a JSON document stamped with `schema_version` (a record is written by
    its type, `qualify.records.run`, at RECORD_VERSION)."""
    document = {"schema_version": version, **payload}
    text = json.dumps(document, indent=2, sort_keys=False, default=str) + "\n"
    write_atomic(path, text.encode("utf-8"))


def write_parquet(path: Path, table: pd.DataFrame) -> None:
    """Atomically write a table as Parquet (the run's tabular format), without its index."""
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    write_atomic(path, buffer.getvalue())


def read_json(path: Path, *, newest: int | None = None) -> dict[str, Any]:
    """Read a qualify JSON file, refusing files from a newer qualify or without a version.

    `newest` is the newest version understood (by default the one for the file's name,
    `newest_version`). The document is returned as written: a record's older layout is brought
    up to date by its type's `load`, never here.
    """
    try:
        # Nested deeper than any record qualify writes: refused here (jsontext.TooDeep, a
        # ValueError), before a reader that walks it runs out of stack.
        document = jsontext.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunStoreError(f"{path}: missing") from None
    except (OSError, ValueError) as exc:
        raise RunStoreError(f"{path}: unreadable: {exc}") from None
    if not isinstance(document, dict):
        raise RunStoreError(f"{path}: expected a JSON object")
    version = document.get("schema_version")
    if not isinstance(version, int):
        raise RunStoreError(f"{path}: no schema_version; not written by qualify")
    known = newest_version(path) if newest is None else newest
    if version > known:
        raise RunStoreError(
            f"{path}: schema_version {version} is newer than this qualify understands ({known})",
            "upgrade qualify to read this run",
        )
    return document


@dataclass(frozen=True)
class RunDir:
    """One run directory."""

    path: Path
    #: The run's number in its runs directory, given by `new_run` (None where not known here:
    #: it is saved in run.json, `runlist.recorded_sequence`).
    sequence: int | None = field(default=None, compare=False)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    def gcroot(self, role: str) -> Path:
        return self.path / "gcroots" / role

    def stage_dir(self, folder: str) -> Path:
        return self.path / folder

    def read(self) -> dict[str, Any]:
        return read_json(self.run_json)

    def folder(self, *parts: str) -> Path:
        """The folder `parts` inside the run, made where missing; no part of the way from the
        run folder (from its set's, for a member written with its set) may be a link."""
        path = self.path.joinpath(*parts)
        if guard_root(path) is not None:
            return ensure_folder(path)
        with guarding(self.path):
            return ensure_folder(path)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Write into the run without its lock (a report, a rejudgement): no write inside it
        goes through a link while the block runs."""
        with guarding(self.path):
            yield

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the writer lock; a second writer is refused instead of waiting. While it is
        held, nothing is written through a link inside the run, and each record saved first
        checks that the lock is still the file held (`check_writer`).

        flock is released by the kernel when the holder dies, so a killed run never leaves a
        stale lock behind: its lock file is used again.
        """
        lock_path = self.path / "lock"
        for _ in range(8):
            fd = self._open_lock(lock_path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                os.close(fd)
                raise RunStoreError(
                    f"run {self.run_id} is being written by {holder}",
                    "wait for it to finish, or stop it first; a run has one writer at a time",
                ) from None
            if runfolder.same_file(lock_path, fd):
                break
            # Locked a file that is no longer the lock (removed or replaced meanwhile): again.
            os.close(fd)
        else:
            raise RunStoreError(
                f"{lock_path}: the run's lock keeps changing", "stop whatever removes it, and run again"
            )
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"qualify pid {os.getpid()}\n".encode(), 0)
            info = os.fstat(fd)
            with guarding(self.path, runfolder.HeldLock(lock_path, fd, info.st_dev, info.st_ino)):
                yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _open_lock(self, lock_path: Path) -> int:
        try:
            return runfolder.open_plain_file(lock_path, "the run's lock")
        except OSError as exc:
            raise RunStoreError(
                f"{lock_path}: cannot open the run's lock: {exc.strerror or exc}",
                f"running or resuming a run writes in its folder: make {self.path} writable, or "
                "copy the run to a writable runs directory",
            ) from None

    def writer_alive(self) -> bool:
        """Whether a process holds the run's lock now (a run saved as running without one was
        killed before it could say so)."""
        lock_path = self.path / "lock"
        try:
            # Opened for reading: a run on a read-only disk can still be shown (flock needs no
            # write). Never through a link: no writer holds a lock there.
            fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def move_to_attempts(self, stage_folder: str) -> Path | None:
        """Move a stage's current results under `<stage>/attempts/<n>/`; return that folder."""
        stage = self.stage_dir(stage_folder)
        try:
            os.close(self._entered(stage))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RunStoreError(f"{stage}: cannot read: {exc.strerror or exc}") from None
        entries = [p for p in stage.iterdir() if p.name != "attempts"]
        if not entries:
            return None
        attempts = self.folder(stage_folder, "attempts")
        numbers = [int(p.name) for p in attempts.glob("*") if p.name.isdigit()]
        target = attempts / str(max(numbers, default=0) + 1)
        target.mkdir()  # a new number: made here, never an existing folder or link
        for entry in entries:
            # A rename: an entry that is a link is moved as the link, never followed.
            shutil.move(str(entry), target / entry.name)
        return target

    def _entered(self, folder: Path) -> int:
        """`folder`, inside the run, open: reached without a link from the run folder (or from
        the outermost run folder being written, for a member of a set)."""
        if guard_root(folder) is not None:
            return runfolder.open_folder(folder, create=False)
        with guarding(self.path):
            return runfolder.open_folder(folder, create=False)
