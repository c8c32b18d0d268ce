"""qualify killed with SIGKILL: nothing it started outlives it, and a resume ends what a dead
run left. Real processes throughout: a command check whose shell starts a grandchild `sleep`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import PY, Project, command_stage, qualify_proc

HANG = f'{PY} -c \'import subprocess, time; subprocess.Popen(["sleep", "300"]); time.sleep(300)\''


def group_members(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def start_hanging_run(
    p: Project, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], Path, int]:
    p.stage("20-compile.toml", command_stage("compile", HANG))
    proc = subprocess.Popen(
        [PY, "-m", "qualify", "run", "--candidate", "cand", "--project", str(p.root)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = p.run_dirs() if p.runs.exists() else []
        record = runs[0] / "processes.jsonl" if runs else None
        if record is not None and record.is_file() and record.read_text().strip():
            pgid = json.loads(record.read_text().splitlines()[0])["pgid"]
            # The python's sleep has started (the group may also hold the containment's wrapper).
            if any(_cmdline(Path("/proc") / str(m)).startswith(b"sleep") for m in group_members(pgid)):
                return proc, runs[0], pgid
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the hanging check never started")


def wait_gone(pgid: int, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and group_members(pgid):
        time.sleep(0.1)
    return group_members(pgid)


def test_sigkill_of_qualify_ends_its_children_and_grandchildren(project: Callable[..., Project]) -> None:
    p = project()
    proc, _run, pgid = start_hanging_run(p)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # The watcher sends TERM at once; the python ignores nothing, so well within the grace.
    assert wait_gone(pgid, 10) == []


def test_a_resume_ends_what_a_dead_run_left(project: Callable[..., Project]) -> None:
    """qualify and its watchers both killed (as when a whole session is): the group survives,
    and the next attempt on the run ends it and says so. Without bubblewrap (`QUALIFY_CONTAINMENT=`
    leaves only unshare's PID namespace, which outlives its parent): bubblewrap's namespace ends
    with qualify, so that there is nothing left for a resume to end."""
    p = project()
    proc, run, pgid = start_hanging_run(p, {**os.environ, "QUALIFY_CONTAINMENT": ""})
    watchers = [
        int(e.name)
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and b"qualify-watch" in _cmdline(e) and f" {pgid} ".encode() in _cmdline(e) + b" "
    ]
    assert watchers
    for pid in [*watchers, proc.pid]:  # the watchers first: qualify's death would wake them
        os.kill(pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)
    assert group_members(pgid), "the group should still be there with its watcher gone"
    saved = json.loads((run / "run.json").read_text())
    assert saved["status"] == "running"  # killed: nothing could write otherwise
    # The resume runs a stage that ends at once: a plan changed since the run was made, which a
    # resume refuses unless told to run under it.
    p.stage("20-compile.toml", command_stage("compile", "true"))
    done = qualify_proc("run", "--run", run.name, "--allow-dirty", "--project", str(p.root))
    said = done.stdout + done.stderr
    assert f"ended group {pgid}" in " ".join(said.split()), said
    assert wait_gone(pgid, 5) == []


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return b""
