"""The run directory: layout, atomic JSON files with `schema_version`, the writer lock.

runs/<run-id>/run.json
runs/<run-id>/lock                       held (flock) by the one process writing the run
runs/<run-id>/gcroots/<role>
runs/<run-id>/<NN-stage>/stage.json
runs/<run-id>/<NN-stage>/<check>/{result.json, <role>/..., logs/}
runs/<run-id>/<NN-stage>/attempts/<n>/   earlier attempts, moved aside, never deleted
runs/<run-id>/report.html  summary.md  report.json

run.json, stage.json and result.json (the run folder's records) are versioned together, at
RECORD_VERSION; every other JSON file qualify writes is at SCHEMA_VERSION. What each record
version holds, and how an older one is read, is `qualify.pipeline.migrations`.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qualify.core.errors import RunStoreError, UsageError

if TYPE_CHECKING:
    import pandas as pd

#: The version of every JSON file qualify writes other than the records (and of the report).
SCHEMA_VERSION = 1
#: The version of the run folder's records, run.json, stage.json and result.json (and the copy
#: of a first result.json that a rejudgement keeps): `qualify.pipeline.migrations`.
RECORD_VERSION = 2
RECORDS = frozenset({"run.json", "stage.json", "result.json", "result.measured.json"})
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` so that `path` holds either the old or the new content, never a mix.

    The bytes go to a temporary file in the same directory, are flushed to disk, then renamed
    over `path` (rename is atomic within one file system).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise RunStoreError(f"{path}: cannot write: {exc.strerror or exc}", _write_hint(exc, path)) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            # mkstemp makes the file private; a report is meant to be read like any file.
            os.fchmod(handle.fileno(), 0o666 & ~_UMASK)
            os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except OSError as exc:
        # A full disk or a directory in the way: the old content stays, the message names it.
        Path(tmp).unlink(missing_ok=True)
        raise RunStoreError(f"{path}: cannot write: {exc.strerror or exc}", _write_hint(exc, path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_hint(exc: OSError, path: Path) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"make {path.parent} writable, or copy the run to a writable folder and use that"
    return "free space or remove what is in the way"


def newest_version(path: Path) -> int:
    """The newest `schema_version` this qualify reads in a file named like `path`."""
    return RECORD_VERSION if path.name in RECORDS else SCHEMA_VERSION


def write_json(path: Path, payload: dict[str, Any], *, version: int = SCHEMA_VERSION) -> None:
    """Atomically write a JSON document stamped with `schema_version` (a record is written by
    its type, `qualify.pipeline.record`, at RECORD_VERSION)."""
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
        document = json.loads(path.read_text(encoding="utf-8"))
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

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the writer lock; a second writer is refused instead of waiting.

        flock is released by the kernel when the holder dies, so a killed run never leaves a
        stale lock behind.
        """
        lock_path = self.path / "lock"
        try:
            handle = lock_path.open("a+")
        except OSError as exc:
            raise RunStoreError(
                f"{lock_path}: cannot open the run's lock: {exc.strerror or exc}",
                f"running or resuming a run writes in its folder: make {self.path} writable, or "
                "copy the run to a writable runs directory",
            ) from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise RunStoreError(
                f"run {self.run_id} is being written by {holder}",
                "wait for it to finish, or stop it first; a run has one writer at a time",
            ) from None
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"qualify pid {os.getpid()}\n")
            handle.flush()
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            handle.close()

    def writer_alive(self) -> bool:
        """Whether a process holds the run's lock now (a run saved as running without one was
        killed before it could say so)."""
        lock_path = self.path / "lock"
        if not lock_path.is_file():
            return False
        try:
            # Opened for reading: a run on a read-only disk can still be shown (flock needs no write).
            handle = lock_path.open("r")
        except OSError:
            return False
        with handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            return False

    def move_to_attempts(self, stage_folder: str) -> Path | None:
        """Move a stage's current results under `<stage>/attempts/<n>/`; return that folder."""
        stage = self.stage_dir(stage_folder)
        if not stage.exists():
            return None
        entries = [p for p in stage.iterdir() if p.name != "attempts"]
        if not entries:
            return None
        attempts = stage / "attempts"
        numbers = [int(p.name) for p in attempts.glob("*") if p.name.isdigit()]
        target = attempts / str(max(numbers, default=0) + 1)
        target.mkdir(parents=True)
        for entry in entries:
            shutil.move(str(entry), target / entry.name)
        return target


#: How much of the candidates' names a run's folder keeps: a set of many candidates still gets
#: a folder name well under the file systems' 255 bytes.
_NAME_KEEPS = 96
_WHERE_RUNS_GO = "or point runs_dir in qualify.toml, --runs-dir or $QUALIFY_RUNS_DIR at a writable folder"


def new_run(runs_dir: Path, candidate: str) -> RunDir:
    """A new run directory named `<UTC time>-<candidate>[-N]`, created atomically: two runs
    started in the same second get different folders (mkdir is the test, not a look first)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", candidate)[:_NAME_KEEPS]
    base = f"{stamp}-{safe}"
    if runs_dir.exists() and not runs_dir.is_dir():
        raise RunStoreError(f"{runs_dir}: the runs directory is not a directory", "point runs_dir elsewhere")
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunStoreError(
            f"{runs_dir}: cannot create the runs directory: {exc.strerror or exc}",
            f"create it (writable) first, {_WHERE_RUNS_GO}",
        ) from None
    for counter in range(1, 10_000):
        path = runs_dir / (base if counter == 1 else f"{base}-{counter}")
        try:
            path.mkdir()
            (path / "gcroots").mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            # A read-only runs directory (or one on a read-only mount) is named, with the way out.
            raise RunStoreError(
                f"{runs_dir}: cannot create a run folder in the runs directory: {exc.strerror or exc}",
                f"make {runs_dir} writable, {_WHERE_RUNS_GO}",
            ) from None
        return RunDir(path)
    raise RunStoreError(f"{runs_dir}: no free run name for {base}")


def list_runs(runs_dir: Path) -> list[RunDir]:
    """Runs in `runs_dir`, oldest first (by creation time recorded in run.json)."""
    if not runs_dir.is_dir():
        return []
    runs = [RunDir(p) for p in runs_dir.iterdir() if (p / "run.json").is_file()]

    def created(run: RunDir) -> str:
        try:
            return str(run.read().get("created_at", ""))
        except RunStoreError:
            return ""

    return sorted(runs, key=lambda r: (created(r), r.run_id))


def open_run(runs_dir: Path, run_id: str | None) -> RunDir:
    """The run named `run_id` (or a path to it), or the latest run when `run_id` is None."""
    if run_id is None:
        runs = list_runs(runs_dir)
        if not runs:
            raise UsageError(f"no runs in {runs_dir}", "start one with `qualify run --candidate ARM`")
        return _checked(runs[-1])
    as_path = Path(run_id)
    if as_path.is_dir() and (as_path / "run.json").is_file():
        return _checked(RunDir(as_path.resolve()))
    if not _RUN_ID.match(run_id) or not (runs_dir / run_id / "run.json").is_file():
        known = [r.run_id for r in list_runs(runs_dir)][-5:]
        raise UsageError(
            f"no run {run_id!r} in {runs_dir}",
            ("recent runs: " + ", ".join(known)) if known else "no runs yet",
        )
    return _checked(RunDir(runs_dir / run_id))


def _checked(run: RunDir) -> RunDir:
    """`run`, once the labels its run.json names folders by are known to stay inside it.

    Every command that reads a run back (show, report, report --rejudge, run --run) opens it
    here; a member of a set is rerun through its set, so the set's run.json is checked too. A
    run.json that cannot be read is left to the command, which says what it needs from it.
    """
    from qualify.core.labels import check_saved_labels

    for folder in (run.path, run.path.parent):
        try:
            saved = read_json(folder / "run.json")
        except RunStoreError:
            if folder == run.path:
                return run
            break
        check_saved_labels(saved, str(folder / "run.json"))
        if "set" not in saved:
            break
    return run
