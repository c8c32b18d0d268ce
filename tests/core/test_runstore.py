"""Run store: atomic writes, schema versions, the writer lock, attempts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qualify.core import runindex
from qualify.core.errors import RunStoreError, UsageError
from qualify.core.runlist import SEQUENCE_FILE, list_runs, new_run, open_run
from qualify.core.runstore import (
    SCHEMA_VERSION,
    LinkInRunError,
    LockLostError,
    RunDir,
    check_writer,
    ensure_folder,
    open_append_nofollow,
    read_json,
    write_json,
)

PY = sys.executable

WRITER = """
import sys
from pathlib import Path
from qualify.core.runstore import write_json
path = Path(sys.argv[1])
i = 0
print("ready", flush=True)
while True:
    i += 1
    write_json(path, {"i": i, "blob": "x" * 4_000_000})
"""


def test_atomic_write_survives_a_kill_mid_write(tmp_path: Path) -> None:
    """A writer SIGKILLed while rewriting a 4 MB file leaves a whole, parseable file."""
    target = tmp_path / "result.json"
    write_json(target, {"i": 0, "blob": ""})
    for delay in (0.05, 0.13, 0.31):
        proc = subprocess.Popen([PY, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        document = read_json(target)  # raises if torn
        assert document["schema_version"] == SCHEMA_VERSION
        assert isinstance(document["i"], int)
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # A killed writer may leave its temp file; it is never mistaken for the result.
    assert all(p.name.startswith(".result.json.") for p in leftovers)


def test_every_file_carries_schema_version_and_newer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    write_json(path, {"a": 1})
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(RunStoreError, match="newer than this qualify"):
        read_json(path)
    path.write_text("{}")
    with pytest.raises(RunStoreError, match="no schema_version"):
        read_json(path)
    path.write_text("{not json")
    with pytest.raises(RunStoreError, match="unreadable"):
        read_json(path)


HOLDER = """
import sys, time
from pathlib import Path
from qualify.core.runstore import RunDir
with RunDir(Path(sys.argv[1])).locked():
    print("locked", flush=True)
    time.sleep(60)
"""


def test_second_writer_is_refused_and_a_dead_holder_frees_the_lock(tmp_path: Path) -> None:
    run = new_run(tmp_path, "r1")
    holder = subprocess.Popen([PY, "-c", HOLDER, str(run.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunStoreError) as err:
            with run.locked():
                pass
        assert f"run {run.run_id} is being written by qualify pid" in err.value.message
    finally:
        holder.kill()
        holder.wait()
    with run.locked():  # the kernel dropped the dead holder's lock
        pass


def test_attempts_are_numbered_and_never_overwritten(tmp_path: Path) -> None:
    run = RunDir(new_run(tmp_path, "r2").path)
    stage = run.stage_dir("20-compile")
    for n in (1, 2):
        stage.mkdir(exist_ok=True)
        (stage / "stage.json").write_text(str(n))
        moved = run.move_to_attempts("20-compile")
        assert moved == stage / "attempts" / str(n)
    assert (stage / "attempts" / "1" / "stage.json").read_text() == "1"
    assert (stage / "attempts" / "2" / "stage.json").read_text() == "2"


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    import os
    import stat

    path = tmp_path / "report.json"
    write_json(path, {"a": 1})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path: Path) -> None:
    """Eight threads create runs for one candidate at once: eight folders, no error."""
    import threading

    made: list[Path] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            made.append(new_run(tmp_path, "cand").path)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and len(set(made)) == 8 and all(p.is_dir() for p in made)


def test_a_runs_dir_that_is_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("")
    with pytest.raises(RunStoreError, match="runs directory is not a directory"):
        new_run(tmp_path / "runs", "cand")


def test_runs_are_numbered_in_the_order_they_are_made(tmp_path: Path) -> None:
    """Sixteen threads make runs at once: each run gets its own number, 1 to 16, taken under
    the runs directory's counter lock (never a clock)."""
    import threading

    numbers: list[int | None] = []

    def start() -> None:
        numbers.append(new_run(tmp_path, "cand").sequence)

    threads = [threading.Thread(target=start) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(n for n in numbers if n is not None) == list(range(1, 17))


def test_a_lost_counter_goes_on_above_the_runs_already_numbered(tmp_path: Path) -> None:
    for _ in range(3):
        run = new_run(tmp_path, "cand")
        write_json(run.run_json, {"run_id": run.run_id, "sequence": run.sequence})
    (tmp_path / SEQUENCE_FILE).unlink()
    assert new_run(tmp_path, "cand").sequence == 4
    (tmp_path / SEQUENCE_FILE).write_text("not a number\n")
    assert new_run(tmp_path, "cand").sequence == 4  # the run of 4 has no run.json yet


def test_the_latest_is_the_last_numbered_then_unnumbered_by_name(tmp_path: Path) -> None:
    def saved(name: str, **document: object) -> RunDir:
        run = RunDir(tmp_path / name)
        run.path.mkdir()
        write_json(run.run_json, {"run_id": name, **document})
        return run

    saved("20990101-000000-b", sequence=1, created_at="2099-01-01T00:00:00+00:00")
    saved("20200101-000000-a", sequence=2, created_at="2020-01-01T00:00:00+00:00")
    saved("20250101-000000-old", created_at="2999-01-01T00:00:00+00:00")
    saved("20240101-000000-old", created_at="2000-01-01T00:00:00+00:00")
    saved("20230101-000000-odd", sequence="3", created_at=7)
    (tmp_path / "20220101-000000-torn").mkdir()
    (tmp_path / "20220101-000000-torn" / "run.json").write_text("{")
    order = [r.run_id for r in list_runs(tmp_path)]
    assert order == [
        "20220101-000000-torn",
        "20230101-000000-odd",
        "20240101-000000-old",
        "20250101-000000-old",
        "20990101-000000-b",
        "20200101-000000-a",
    ]
    # The latest is taken among the runs the runs directory's index lists as made here only:
    # none here, then the two numbered ones (a folder written by hand is listed by no index).
    with pytest.raises(UsageError, match="is one this runs directory made"):
        open_run(tmp_path, None)
    runindex.add(tmp_path, "20990101-000000-b", 1)
    runindex.add(tmp_path, "20200101-000000-a", 2)
    assert open_run(tmp_path, None).run_id == "20200101-000000-a"


def test_a_counter_that_is_a_link_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("41\n")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / SEQUENCE_FILE).symlink_to(outside)
    with pytest.raises(RunStoreError) as err:
        new_run(runs, "cand")
    assert str(runs / SEQUENCE_FILE) in err.value.message and str(outside) in err.value.message
    assert outside.read_text() == "41\n"
    assert not [p for p in runs.iterdir() if p.is_dir()]  # no run folder left behind


def _linked_lock(tmp_path: Path) -> tuple[RunDir, Path]:
    run = new_run(tmp_path / "runs", "cand")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (run.path / "lock").symlink_to(victim)
    return run, victim


def test_a_lock_that_is_a_link_is_never_opened_through(tmp_path: Path) -> None:
    run, victim = _linked_lock(tmp_path)
    with pytest.raises(LinkInRunError) as err:
        with run.locked():
            pass
    assert str(run.path / "lock") in err.value.message and str(victim) in err.value.message
    assert err.value.hint and "remove" in err.value.hint
    assert victim.read_text() == "keep me\n"
    assert run.writer_alive() is False
    # A dangling link is refused the same way, and nothing is made where it points.
    (run.path / "lock").unlink()
    (run.path / "lock").symlink_to(tmp_path / "made-by-lock")
    with pytest.raises(LinkInRunError):
        with run.locked():
            pass
    assert not (tmp_path / "made-by-lock").exists()


def test_a_lock_that_is_not_a_plain_file_is_refused(tmp_path: Path) -> None:
    import os

    run = new_run(tmp_path / "runs", "cand")
    lock = run.path / "lock"
    os.mkfifo(lock)
    with pytest.raises(RunStoreError, match="not a regular file"):
        with run.locked():
            pass
    lock.unlink()
    lock.mkdir()
    with pytest.raises(RunStoreError, match="not a regular file"):
        with run.locked():
            pass
    lock.rmdir()
    other = tmp_path / "other.txt"
    other.write_text("keep me\n")
    os.link(other, lock)  # another name of a file outside the run
    with pytest.raises(RunStoreError, match="other names"):
        with run.locked():
            pass
    assert other.read_text() == "keep me\n"


def test_a_lock_removed_or_replaced_while_held_stops_the_writer(tmp_path: Path) -> None:
    run = new_run(tmp_path / "runs", "cand")
    record = run.path / "10-build" / "stage.json"
    with run.locked():
        check_writer(record)  # the lock is the file held: nothing to say
        (run.path / "lock").unlink()
        with pytest.raises(LockLostError, match="removed"):
            check_writer(record)
        with pytest.raises(LockLostError):
            check_writer(run.run_json)
    with run.locked():  # a new lock file, made exclusively
        (run.path / "lock").unlink()
        (run.path / "lock").write_text("someone else\n")
        with pytest.raises(LockLostError, match="replaced"):
            check_writer(record)
    check_writer(record)  # no lock held: nothing to check
    with run.locked():  # the leftover lock file of an ended writer is reused
        pass


def test_no_write_goes_through_a_link_in_a_run_folder(tmp_path: Path) -> None:
    """A check folder, a logs folder and a log file that are links: refused while the run is
    written (by its writer, or while it is written without the lock: a report)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    run = new_run(tmp_path / "runs", "cand")
    stage = run.path / "10-build"
    stage.mkdir()
    (stage / "check").symlink_to(outside)
    for holding in (run.locked, run.writing):
        with holding():
            with pytest.raises(LinkInRunError) as err:
                write_json(stage / "check" / "result.json", {"a": 1})
            assert f"{stage / 'check'}: is a symbolic link" in err.value.message
            assert str(outside) in err.value.message
            with pytest.raises(LinkInRunError):
                ensure_folder(stage / "check" / "pinned")
            with pytest.raises(LinkInRunError):
                run.folder("10-build", "check", "logs")
            with pytest.raises(LinkInRunError):
                open_append_nofollow(stage / "check" / "logs" / "pinned-run.log")
    assert list(outside.iterdir()) == []
    # A stage folder that is a link: its results are not moved into where it points.
    (outside / "stage.json").write_text("{}")
    (run.path / "20-compile").symlink_to(outside)
    with pytest.raises(LinkInRunError):
        run.move_to_attempts("20-compile")
    assert [p.name for p in outside.iterdir()] == ["stage.json"]
    (outside / "stage.json").unlink()
    (stage / "check").unlink()
    logs = run.folder("10-build", "check", "logs")
    (logs / "pinned-run.log").symlink_to(outside / "log")
    with pytest.raises(LinkInRunError):
        open_append_nofollow(logs / "pinned-run.log")
    assert list(outside.iterdir()) == []
    with open_append_nofollow(logs / "candidate-run.log") as handle:
        handle.write("line\n")
    assert (logs / "candidate-run.log").read_text() == "line\n"


def test_a_runs_dir_under_a_linked_folder_is_written_as_usual(tmp_path: Path) -> None:
    """Only what is inside a run folder is checked: /tmp may itself be a link on some systems."""
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    run = new_run(tmp_path / "alias" / "runs", "cand")
    with run.locked():
        write_json(run.path / "10-build" / "check" / "result.json", {"a": 1})
        folder = ensure_folder(run.path / "10-build" / "check" / "pinned")
        with open_append_nofollow(run.path / "10-build" / "check" / "logs" / "x.log") as handle:
            handle.write("x\n")
    assert folder.is_dir()
    assert read_json(tmp_path / "real" / "runs" / run.run_id / "10-build" / "check" / "result.json")["a"] == 1
