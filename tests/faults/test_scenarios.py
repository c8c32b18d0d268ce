"""Fault scenarios on small real projects: signals, stubborn children, two writers, a full disk, a
corrupt result, an unwritable report. Each asserts the exit code and message, that every saved
JSON still parses, that nothing finished is lost, and that no process qualify started is alive
afterwards (the run's own record of its process groups, checked against /proc)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage, qualify_proc
from test_kill import group_members

SLOW = f"{PY} -c 'import time; time.sleep(60)'"


def slow_until(path: Path) -> str:
    """A command that sleeps a minute, or not at all once `path` exists: a resume finds it quick
    with the plan the run recorded unchanged."""
    return f"{PY} -c 'import os, time; time.sleep(0 if os.path.exists(\"{path}\") else 60)'"


#: A child that ignores SIGTERM and keeps its group busy: only SIGKILL ends it.
STUBBORN = f"{PY} -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'"


def start(p: Project, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "qualify", "run", *args, "--project", str(p.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(predicate: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def started_groups(run: Path) -> list[int]:
    record = run / "processes.jsonl"
    if not record.is_file():
        return []
    return [json.loads(line)["pgid"] for line in record.read_text().splitlines() if line.strip()]


def settled(run: Path) -> None:
    """Every JSON parses and no group the run recorded has a live process."""
    for path in run.rglob("*.json"):
        json.loads(path.read_text())
    alive = {pgid: group_members(pgid) for pgid in started_groups(run)}
    assert not any(alive.values()), alive


def two_stages(p: Project, second: str) -> None:
    p.stage("20-compile.toml", command_stage("compile", "true"))
    p.stage("30-numerics.toml", command_stage("numerics", second))


def test_sigterm_mid_stage_stops_cleanly_and_the_resume_keeps_what_finished(
    project: Callable[..., Project],
) -> None:
    p = project()
    quick = p.root / "quick"
    two_stages(p, slow_until(quick))
    proc = start(p, "--candidate", "cand")
    wait_for(lambda: p.runs.exists() and bool(p.run_dirs()) and (p.run_dirs()[0] / "30-numerics").exists())
    [run] = p.run_dirs()
    wait_for(lambda: bool(started_groups(run)) and len(started_groups(run)) >= 3)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    saved = json.loads((run / "run.json").read_text())
    assert saved["status"] == "interrupted"
    settled(run)
    compile_started = json.loads((run / "20-compile" / "stage.json").read_text())["started_at"]
    quick.write_text("")
    done = qualify_proc("run", "--run", run.name, "--project", str(p.root))
    assert done.returncode == 3, done.stdout + done.stderr  # later stages not configured
    assert json.loads((run / "20-compile" / "stage.json").read_text())["started_at"] == compile_started
    settled(run)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", STUBBORN, timeout="1"))
    start_s = time.monotonic()
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    [run] = p.run_dirs()
    result = json.loads((run / "20-compile" / "compile-check" / "result.json").read_text())
    assert "stopped at its 1 s limit" in result["reason"], result["reason"]
    assert time.monotonic() - start_s < 40  # 1 s limit, 5 s grace per role, then SIGKILL
    assert done.returncode == 1
    settled(run)


@pytest.mark.slow
def test_two_runs_at_once_get_their_own_folders(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", f"{PY} -c 'import time; time.sleep(1)'"))
    procs = [start(p, "--candidate", "cand") for _ in range(2)]
    outs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [3, 3], outs
    runs = p.run_dirs()
    assert len(runs) == 2
    for run in runs:
        assert json.loads((run / "run.json").read_text())["status"] == "complete"
        settled(run)


def test_a_second_resume_of_one_run_is_refused(project: Callable[..., Project]) -> None:
    p = project()
    two_stages(p, SLOW)
    first = start(p, "--candidate", "cand")
    wait_for(lambda: p.runs.exists() and bool(p.run_dirs()) and (p.run_dirs()[0] / "30-numerics").exists())
    [run] = p.run_dirs()
    second = qualify_proc("run", "--run", run.name, "--project", str(p.root))
    said = " ".join((second.stdout + second.stderr).split())
    assert second.returncode == 2 and f"run {run.name} is being written by qualify pid {first.pid}" in said
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=60)
    assert first.returncode == 130
    settled(run)


@pytest.mark.slow
def test_a_corrupt_result_json_is_reported_and_rerun(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    [run] = p.run_dirs()
    result = run / "20-compile" / "compile-check" / "result.json"
    result.write_text("{cut short")
    shown = qualify_proc("report", run.name, "--project", str(p.root))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "unreadable" in (run / "report.html").read_text()
    done = qualify_proc("run", "--only", "compile", "--force", "--project", str(p.root))
    assert done.returncode == 3
    assert json.loads(result.read_text())["verdict"] == "PASS"
    assert (
        run / "20-compile" / "attempts" / "1" / "compile-check" / "result.json"
    ).read_text() == "{cut short"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs needs root")
def test_a_full_disk_fails_cleanly_and_loses_nothing(project: Callable[..., Project], tmp_path: Path) -> None:
    """The runs directory on a 1 MiB tmpfs; the check writes 4 MiB to its output."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], check=False)
    if mounted.returncode != 0:
        pytest.skip("this machine cannot mount a tmpfs")
    try:
        p = project()
        p.stage("20-compile.toml", command_stage("compile", "true"))
        p.stage(
            "30-numerics.toml",
            command_stage("numerics", f'{PY} -c \'open("{{out_file}}", "wb").write(bytes(4 << 20))\''),
        )
        done = qualify_proc("run", "--candidate", "cand", "--runs-dir", str(small), "--project", str(p.root))
        said = done.stdout + done.stderr
        assert done.returncode in (1, 2, 3), said
        assert "Traceback" not in said
        [run] = [d for d in small.iterdir() if (d / "run.json").is_file()]
        assert json.loads((run / "20-compile" / "stage.json").read_text())["verdict"] == "PASS"
        for path in run.rglob("*.json"):
            json.loads(path.read_text())  # atomic writes: nothing half-written
        settled(run)
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_an_unwritable_report_path_names_it(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    [run] = p.run_dirs()
    (run / "report.html").unlink()
    (run / "report.html").mkdir()  # a directory where the report goes
    done = qualify_proc("report", run.name, "--project", str(p.root))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and str(run / "report.html") in said and "internal error" not in said, said
    settled(run)
