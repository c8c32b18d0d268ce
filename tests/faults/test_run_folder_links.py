"""A run folder with a link in it, and a lock that goes away mid-run, on real runs through the CLI.

A run folder can come from somewhere else (an archive, a copy) and commands run inside it: a
link planted where qualify writes (the lock, a stage's folder, its attempts, a member's folder)
must be refused by name, never written through, and whatever the link points to left as it
was. A writer whose lock was removed or replaced stops at the next record it saves, so a second
writer is never let in beside it. Real projects of `command` stages run by the real CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage, qualify_proc

THREE = """
[arms.pinned]
installable = ".#default"
[arms.cand]
installable = ".#cand"
[arms.cand2]
installable = ".#cand2"
"""


def one_stage(project: Callable[..., Project], config: str | None = None) -> Project:
    p = project(config) if config else project()
    p.stage("10-build.toml", command_stage("build", "true"))
    return p


def first_run(p: Project, *candidates: str) -> Path:
    args = [a for c in candidates or ("cand",) for a in ("--candidate", c)]
    done = qualify_proc("run", *args, "--project", str(p.root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    [run] = p.run_dirs()
    return run


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every path under `folder` with its bytes (a folder or link: its kind)."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        out[key] = "link" if path.is_symlink() else ("dir" if path.is_dir() else path.read_bytes())
    return out


def said(done: object) -> str:
    return " ".join((getattr(done, "stdout", "") + getattr(done, "stderr", "")).split())


@pytest.mark.slow
def test_a_lock_that_is_a_link_is_refused_and_what_it_points_to_kept(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """The lock was opened through the link and truncated: the file it pointed to lost its text."""
    p = one_stage(project)
    run = first_run(p)
    victim = tmp_path / "outside" / "notes.txt"
    victim.parent.mkdir()
    victim.write_text("keep me\n")
    (run / "lock").unlink()
    (run / "lock").symlink_to(victim)
    done = qualify_proc("run", "--run", run.name, "--project", str(p.root))
    text = said(done)
    assert done.returncode == 2, text
    assert str(run / "lock") in text and str(victim) in text and "link" in text, text
    assert "remove" in text and "internal error" not in text, text
    assert victim.read_text() == "keep me\n"
    # Once the link is gone, the run resumes with a lock of its own.
    (run / "lock").unlink()
    again = qualify_proc("run", "--run", run.name, "--project", str(p.root))
    assert again.returncode in (0, 3), said(again)
    assert (run / "lock").is_file() and not (run / "lock").is_symlink()


def test_a_stage_folder_that_is_a_link_is_refused(project: Callable[..., Project], tmp_path: Path) -> None:
    """The stage's results were moved into the folder the link pointed to, and written there."""
    p = one_stage(project)
    run = first_run(p)
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "10-build").rename(outside / "10-build")
    (run / "10-build").symlink_to(outside / "10-build")
    before = snapshot(outside)
    done = qualify_proc("run", "--only", "build", "--force", "--project", str(p.root))
    text = said(done)
    assert done.returncode == 2, text
    assert str(run / "10-build") in text and str(outside / "10-build") in text and "link" in text, text
    assert "internal error" not in text
    assert snapshot(outside) == before


def test_attempts_that_are_a_link_are_refused(project: Callable[..., Project], tmp_path: Path) -> None:
    p = one_stage(project)
    run = first_run(p)
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "10-build" / "attempts").symlink_to(outside)
    done = qualify_proc("run", "--only", "build", "--force", "--project", str(p.root))
    text = said(done)
    assert done.returncode == 2, text
    assert str(run / "10-build" / "attempts") in text and str(outside) in text, text
    assert list(outside.iterdir()) == []
    # What the stage had is still in its folder.
    assert (run / "10-build" / "stage.json").is_file()


def test_a_member_folder_that_is_a_link_is_refused(project: Callable[..., Project], tmp_path: Path) -> None:
    """A run set's member lives in a folder inside the set's: a link there was followed for the
    member's lock, its run.json and its stages."""
    p = one_stage(project, THREE)
    run = first_run(p, "cand", "cand2")
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "cand").rename(outside / "cand")
    (run / "cand").symlink_to(outside / "cand")
    before = snapshot(outside)
    done = qualify_proc("run", "--run", run.name, "--force", "--project", str(p.root))
    text = said(done)
    assert done.returncode == 2, text
    assert str(run / "cand") in text and str(outside / "cand") in text and "link" in text, text
    assert snapshot(outside) == before


#: Says it started (a file in its own folder), then waits for the test's go-ahead (a file outside
#: the runs directory, which a command cannot write).
WAIT = """
import sys, time
from pathlib import Path
(Path(sys.argv[1]) / "started").write_text("")
while not Path(sys.argv[2]).exists():
    time.sleep(0.05)
"""


def stopped_mid_run(project: Callable[..., Project], tmp_path: Path, replace: bool) -> tuple[Path, str, int]:
    """A run whose lock is removed (and, with `replace`, made again as another file) while its
    first check runs; its folder, what it said, its exit code."""
    p = project()
    p.script("wait.py", WAIT)
    go = tmp_path / "go"
    p.stage("10-build.toml", command_stage("build", f"{{py}} {{project}}/wait.py {{dir}} {go}"))
    p.stage("20-compile.toml", command_stage("compile", "true"))
    proc = subprocess.Popen(
        [PY, "-m", "qualify", "run", "--candidate", "cand", "--project", str(p.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(p.runs.glob("*/10-build/build-check/pinned/started")):
            assert proc.poll() is None and time.monotonic() < deadline, "the check never started"
            time.sleep(0.05)
        [run] = p.run_dirs()
        (run / "lock").unlink()
        if replace:
            (run / "lock").write_text("another writer\n")
        go.write_text("")
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    return run, " ".join(out.split()), proc.returncode


def test_a_lock_removed_during_a_run_stops_it(project: Callable[..., Project], tmp_path: Path) -> None:
    """The run went on to its end: a second `qualify run --run` could have been let in to write
    beside it the moment the lock was gone."""
    run, text, code = stopped_mid_run(project, tmp_path, replace=False)
    assert code == 2, text
    assert str(run / "lock") in text and "removed" in text and "internal error" not in text, text
    assert not (run / "20-compile").exists()
    # Nothing more was written as this writer: run.json says what the writer last saved.
    assert json.loads((run / "run.json").read_text())["status"] == "running"


def test_a_lock_replaced_during_a_run_stops_it(project: Callable[..., Project], tmp_path: Path) -> None:
    run, text, code = stopped_mid_run(project, tmp_path, replace=True)
    assert code == 2, text
    assert str(run / "lock") in text and "replaced" in text and "internal error" not in text, text
    assert not (run / "20-compile").exists()
    assert (run / "lock").read_text() == "another writer\n"


def test_a_check_folder_that_is_a_link_is_refused(project: Callable[..., Project], tmp_path: Path) -> None:
    """The first check's command puts a link where the second check's folder goes: the second
    check's results, logs and role folders went where it pointed. Commands are let write the
    run folder here (QUALIFY_CONTAINMENT empty: no mount namespace), as on a host without one."""
    outside = tmp_path / "outside"
    outside.mkdir()
    p = project()
    p.stage(
        "10-build.toml",
        f"""
        name = "build"
        [[check]]
        kind = "command"
        name = "plant"
        run = "ln -sfn {outside} {{dir}}/../../second"
        [[check]]
        kind = "command"
        name = "second"
        run = "true"
        """,
    )
    done = qualify_proc(
        "run",
        "--candidate",
        "cand",
        "--project",
        str(p.root),
        env={**os.environ, "QUALIFY_CONTAINMENT": ""},
    )
    text = said(done)
    [run] = p.run_dirs()
    assert done.returncode == 2, text
    assert str(run / "10-build" / "second") in text and str(outside) in text and "link" in text, text
    assert "internal error" not in text
    assert list(outside.iterdir()) == []
