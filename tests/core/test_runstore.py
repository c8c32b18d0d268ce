"""Run store: atomic writes, schema versions, the writer lock, attempts."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qualify.core.errors import RunStoreError
from qualify.core.runstore import SCHEMA_VERSION, RunDir, new_run, read_json, write_json

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
