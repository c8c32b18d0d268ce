"""The runs directory: a new run's folder and number, the runs in the order they were made,
and the run a command names (or the latest).

"The latest run" is the one made last on this host, by the number each run gets when it is made
(`runs/.sequence`), never by a saved clock: a host's clock may be wrong, and a run dated in the
future would otherwise stay the latest for good. Only the runs the runs directory's
authenticated index lists (`qualify.core.runindex`) can be the latest: a folder copied in, or a
run.json whose `sequence` was raised, is never taken for the run made last.
"""

from __future__ import annotations

import fcntl
import os
import re
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

from qualify.core import runfolder, runindex
from qualify.core.errors import RunStoreError, UsageError
from qualify.core.runstore import RunDir, read_json

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
SEQUENCE_FILE = ".sequence"


#: How much of the candidates' names a run's folder keeps: a set of many candidates still gets
#: a folder name well under the file systems' 255 bytes.
_NAME_KEEPS = 96
_WHERE_RUNS_GO = "or point runs_dir in qualify.toml, --runs-dir or $QUALIFY_RUNS_DIR at a writable folder"


def new_run(runs_dir: Path, candidate: str) -> RunDir:
    """A new run directory named `<UTC time>-<candidate>[-N]`, created atomically: two runs
    started in the same second get different folders (mkdir is the test, not a look first).

    The run is numbered (`RunDir.sequence`, saved in its run.json): the order runs are made
    in here is what "the latest run" means, never a clock (a host's clock may be wrong, and
    the folder's name is a clock too).
    """
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
        try:
            return RunDir(path, _next_sequence(runs_dir, path.name))
        except BaseException:
            # Not numbered, not a run: the empty folder goes.
            with suppress(OSError):
                (path / "gcroots").rmdir()
                path.rmdir()
            raise
    raise RunStoreError(f"{runs_dir}: no free run name for {base}")


def _next_sequence(runs_dir: Path, run_id: str) -> int:
    """The next number of the runs directory's counter, taken under its flock (so two runs
    made at once get two numbers), and listed with `run_id` in the runs directory's index. A
    missing or unreadable counter goes on from the highest number the runs here have saved."""
    path = runs_dir / SEQUENCE_FILE
    for _ in range(8):
        try:
            fd = runfolder.open_plain_file(path, "the runs directory's counter")
        except OSError as exc:
            raise RunStoreError(
                f"{path}: cannot number the new run: {exc.strerror or exc}",
                f"make {runs_dir} writable, {_WHERE_RUNS_GO}",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held for a read and a write: others wait
            if not runfolder.same_file(path, fd):
                continue  # replaced while this one waited: count on the file that is there
            text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            number = (int(text) if text.isdigit() else _highest_sequence(runs_dir)) + 1
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{number}\n".encode(), 0)
            os.fsync(fd)
            runindex.add(runs_dir, run_id, number)
            return number
        finally:
            os.close(fd)
    raise RunStoreError(f"{path}: the runs directory's counter keeps changing", "stop whatever replaces it")


def _highest_sequence(runs_dir: Path) -> int:
    numbers = (recorded_sequence(RunDir(p)) for p in runs_dir.iterdir() if (p / "run.json").is_file())
    return max((n for n in numbers if n is not None), default=0)


def recorded_sequence(run: RunDir) -> int | None:
    """The number `new_run` gave `run`, as its run.json saved it; None for a run of a qualify
    that numbered none (or whose run.json does not read)."""
    try:
        number = run.read().get("sequence")
    except RunStoreError:
        return None
    return number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None


def list_runs(runs_dir: Path) -> list[RunDir]:
    """Runs in `runs_dir`, oldest first: in the order they were made here (`new_run`'s
    numbers), after those that have no number (made by an older qualify, or whose run.json
    does not read), which go by name. No saved time counts: a host's clock may be wrong."""
    if not runs_dir.is_dir():
        return []
    runs = [RunDir(p, recorded_sequence(RunDir(p))) for p in runs_dir.iterdir() if (p / "run.json").is_file()]
    return sorted(runs, key=lambda r: (r.sequence is not None, r.sequence or 0, r.run_id))


def open_run(runs_dir: Path, run_id: str | None) -> RunDir:
    """The run named `run_id` (or a path to it), or the latest run when `run_id` is None."""
    if run_id is None:
        runs = list_runs(runs_dir)
        if not runs:
            raise UsageError(f"no runs in {runs_dir}", "start one with `qualify run --candidate ARM`")
        index = runindex.read(runs_dir)
        made = sorted((index.runs[r.run_id], r.run_id) for r in runs if r.run_id in index.runs)
        if not made:
            raise UsageError(
                f"no run in {runs_dir} is one this runs directory made ({index.problem or 'none listed'})",
                "name the run to read (`qualify runs` lists them)",
            )
        return _checked(RunDir(runs_dir / made[-1][1], made[-1][0]))
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
        if check_saved_labels(saved, str(folder / "run.json")).set_label is None:
            break  # not a set's member: no set's run.json above it to check
    return run
