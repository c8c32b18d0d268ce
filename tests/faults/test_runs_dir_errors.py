"""A runs directory qualify cannot write: named, with what to do, never "internal error".

Real projects with one `command` stage, run by the real CLI; the runs directory is made
read-only for real (file modes, or a read-only bind mount when the suite runs as root).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import Project, command_stage, qualify_proc
from readonly import read_only


def one_stage(project: Callable[..., Project]) -> Project:
    p = project()
    p.stage("10-build.toml", command_stage("build", "true"))
    return p


def test_a_new_run_in_a_read_only_runs_dir_names_it(project: Callable[..., Project]) -> None:
    """It ended in "internal error: PermissionError(13, 'Permission denied')" with no path."""
    p = one_stage(project)
    with read_only(p.runs) as runs:
        done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert f"{runs}: cannot create a run folder" in said and "writable" in said and "--runs-dir" in said
    assert "internal error" not in said


def test_a_runs_dir_under_a_read_only_folder_names_it(project: Callable[..., Project]) -> None:
    p = one_stage(project)
    with read_only(p.root / "locked") as locked:
        runs = locked / "runs"
        done = qualify_proc("run", "--candidate", "cand", "--runs-dir", str(runs), "--project", str(p.root))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and f"{runs}: cannot create the runs directory" in said, said
    assert "internal error" not in said


@pytest.mark.slow
def test_a_kept_run_on_a_read_only_disk_is_shown_and_its_resume_named(
    project: Callable[..., Project],
) -> None:
    """show only reads (its writer check opened the lock for writing); run --run needs to write,
    and says where."""
    p = one_stage(project)
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    [run] = p.run_dirs()
    with read_only(p.runs):
        shown = qualify_proc("show", run.name, "--project", str(p.root))
        resumed = qualify_proc("run", "--run", run.name, "--project", str(p.root))
        reported = qualify_proc("report", run.name, "--project", str(p.root))
    assert shown.returncode in (0, 3) and "build" in shown.stdout, shown.stdout + shown.stderr
    said = " ".join((resumed.stdout + resumed.stderr).split())
    assert resumed.returncode == 2 and str(run / "lock") in said and "writable" in said, said
    said = " ".join((reported.stdout + reported.stderr).split())
    assert reported.returncode == 2 and str(run) in said and "writable" in said, said
    assert "internal error" not in said


def test_rejudge_of_a_run_on_a_read_only_disk_names_it(project: Callable[..., Project]) -> None:
    """It ended in "internal error: OSError(30, 'Read-only file system')" from a file copy."""
    p = one_stage(project)
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    [run] = p.run_dirs()
    with read_only(p.runs):
        again = qualify_proc("report", run.name, "--rejudge", "--project", str(p.root))
    said = " ".join((again.stdout + again.stderr).split())
    assert again.returncode == 2, said
    assert f"{run}: the run folder is not writable" in said and "internal error" not in said
