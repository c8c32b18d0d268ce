"""Checked commands are contained: nothing one does can forge a verdict, outlive the run, make a
rerun kill a stranger, exhaust memory or disk, or hang the run.

Every test runs real commands through the real CLI; the hostile command is a small Python or
shell program of the test (standing in for an engine's build, test or server that misbehaves).
Where a test runs in each containment the host can give (a cgroup and a read-only mount by
default; the process tree and the seal alone with `QUALIFY_CONTAINMENT=`), it says so.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage, qualify_proc

from qualify.core import cgroups, proctree
from qualify.core.groups import boot_id

STAGES = ("build", "compile", "numerics", "serving", "soak", "bench", "distribution")
CONFIG = """
[arms.pinned]
installable = ".#default"

[arms.cand]
installable = ".#cand"
"""

#: Exits with the code given, for the candidate only.
CHECK = "import sys; sys.exit(int(sys.argv[2]) if sys.argv[1] == 'candidate' else 0)"

#: Rewrites every record of the compile stage from FAIL to PASS (as a forger would), after
#: waiting `argv[2]` seconds; says in `argv[3]` what it could do.
FORGER = """\
import pathlib, sys, time
time.sleep(float(sys.argv[2]))
done = []
for path in pathlib.Path(sys.argv[1]).rglob("*.json"):
    if "20-compile" in path.parts and path.name in ("stage.json", "result.json"):
        try:
            path.write_text(path.read_text().replace('"FAIL"', '"PASS"'))
            done.append(str(path))
        except OSError as exc:
            done.append(f"refused: {exc}")
pathlib.Path(sys.argv[3]).write_text("\\n".join(done))
"""

#: Starts a process in a session of its own that outlives its parent (a sleep of a length no
#: other process has, found again by it: in a PID namespace its own pid means nothing outside).
ESCAPE = "import subprocess, sys; subprocess.Popen(['setsid', 'sleep', sys.argv[1]])"

MODES = {
    "cgroup and mount": None,
    "process tree and seal": "",
}


def env_for(mode: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("QUALIFY_CONTAINMENT", None)
    if mode is not None:
        env["QUALIFY_CONTAINMENT"] = mode
    return env


def stage(p: Project, name: str, run: str) -> None:
    index = STAGES.index(name) + 1
    p.stage(f"{index}0-{name}.toml", command_stage(name, run))


def six(p: Project, compile_code: int) -> None:
    p.script("check.py", CHECK)
    p.script("forger.py", FORGER)
    p.script("escape.py", ESCAPE)
    for name in STAGES:
        stage(p, name, f"{PY} {p.root / 'check.py'} {{role}} {compile_code if name == 'compile' else 0}")


def shown(p: Project, run: Path, env: dict[str, str]) -> dict[str, object]:
    done = qualify_proc("show", run.name, "--json", "--project", str(p.root), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout[done.stdout.index("{") :]))


def alive(pid: int) -> bool:
    found = proctree.entry(pid)
    return found is not None and not found.zombie


def running_with(word: str) -> list[int]:
    """The live processes with `word` among their arguments (a command's pid in its own PID
    namespace is no pid here)."""
    found = []
    for pid in proctree.table():
        try:
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if word.encode() in argv:
            found.append(pid)
    return found


@pytest.mark.parametrize("mode", list(MODES))
def test_a_later_check_cannot_turn_a_failed_stage_into_a_pass(
    project: Callable[..., Project], mode: str
) -> None:
    """compile FAILs; with --no-gate, the bench's command rewrites compile's records to PASS.
    A read-only mount refuses the writes; without one, the seal finds them and stops the run.
    Either way the run is never QUALIFIED."""
    env = env_for(MODES[mode])
    p = project(CONFIG)
    six(p, compile_code=1)
    said = p.root / "forged.txt"
    stage(p, "bench", f"{PY} {p.root / 'forger.py'} {{run_dir}} 0 {said}")
    done = qualify_proc("run", "--candidate", "cand", "--no-gate", "--project", str(p.root), env=env)
    output = done.stdout + done.stderr
    (run,) = p.run_dirs()
    saved = json.loads((run / "run.json").read_text())
    held = saved["containment"]
    if MODES[mode] is None and os.geteuid() == 0 and cgroups.cgroup2_mount() is not None:
        # As root with a cgroup v2 hierarchy both are given: never a silent fallback here.
        assert held["processes"].startswith("cgroup v2"), held
        if shutil.which("bwrap"):
            assert held["records"].startswith("read-only mount"), held
    elif MODES[mode] == "":
        assert held["processes"].startswith("process tree") and held["records"].startswith("sealed"), held
    view = shown(p, run, env)
    assert view["verdict"] != "QUALIFIED", output
    if "read-only mount" in saved["containment"]["records"]:
        assert said.read_text().count("refused") == 2, said.read_text()
        assert done.returncode == 1, output
        assert json.loads((run / "20-compile" / "stage.json").read_text())["verdict"] == "FAIL"
    else:
        assert done.returncode == 2, output
        assert "tampered" in output and "20-compile" in output, output
        assert "tampered" in json.dumps(view), view


@pytest.mark.parametrize(
    "mode", ["cgroup and mount", pytest.param("process tree and seal", marks=pytest.mark.slow)]
)
def test_a_detached_child_is_ended_with_its_command_and_forges_nothing_after_the_run(
    project: Callable[..., Project], mode: str
) -> None:
    """compile's command starts a child in its own session that waits, then rewrites compile's
    records; the child is ended when the command ends, so the records stay as judged."""
    env = env_for(MODES[mode])
    p = project(CONFIG)
    six(p, compile_code=1)
    said = p.root / "forged.txt"
    p.script(
        "detach.py",
        "import subprocess, sys\n"
        f"p = subprocess.Popen(['setsid', '{PY}', '{p.root / 'forger.py'}', sys.argv[1], '3', '{said}'])\n"
        "sys.exit(1 if sys.argv[2] == 'candidate' else 0)\n",
    )
    stage(p, "compile", f"{PY} {p.root / 'detach.py'} {{run_dir}} {{role}}")
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root), env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert not running_with(str(said)), f"the detached forger outlived the run: {running_with(str(said))}"
    time.sleep(4)
    assert not said.exists(), said.read_text()
    (run,) = p.run_dirs()
    assert json.loads((run / "20-compile" / "stage.json").read_text())["verdict"] == "FAIL"
    assert shown(p, run, env)["verdict"] == "NOT QUALIFIED"


@pytest.mark.parametrize("mode", list(MODES))
def test_a_child_in_its_own_session_does_not_outlive_its_command(
    project: Callable[..., Project], mode: str
) -> None:
    env = env_for(MODES[mode])
    p = project(CONFIG)
    six(p, compile_code=0)
    length = f"300.{secrets.randbelow(10**9):09d}"
    stage(p, "numerics", f"{PY} {p.root / 'escape.py'} {length}")
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root), env=env)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    escaped = running_with(length)
    try:
        assert not escaped, f"{escaped} ({mode}) outlived the run"
    finally:
        for pid in escaped:
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_a_resume_leaves_a_stranger_with_a_recorded_group_number_alone(
    project: Callable[..., Project],
) -> None:
    """processes.jsonl names a group by the number of a process that is not the run's (as a
    number reused since, or an edited record would): the resume must not kill it."""
    p = project(CONFIG)
    six(p, compile_code=0)
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode in (0, 3), done.stdout + done.stderr
    (run,) = p.run_dirs()
    stranger = subprocess.Popen(["setsid", "sleep", "300"])
    try:
        deadline = time.monotonic() + 10
        while (found := proctree.entry(stranger.pid)) is None or found.session != stranger.pid:
            assert time.monotonic() < deadline, "setsid did not make its own session"
            time.sleep(0.02)
        records = [
            {"pgid": stranger.pid, "start": found.start - 1, "boot": boot_id(), "argv": ["sleep"]},
            {"pgid": stranger.pid, "start": 0, "argv": ["sleep"]},
            {
                "pgid": stranger.pid,
                "start": found.start,
                "boot": boot_id(),
                "mark": "x.1",
                "cgroup": "/",
                "argv": [],
            },
        ]
        (run / "processes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:2]))
        again = qualify_proc("run", "--run", run.name, "--only", "build", "--project", str(p.root))
        assert again.returncode in (0, 3), again.stdout + again.stderr
        assert stranger.poll() is None, "the resume killed a process that was not the run's"
        assert "ended group" not in again.stdout + again.stderr
        # A record naming a cgroup qualify did not make (the root of the hierarchy) is ignored.
        (run / "processes.jsonl").write_text(json.dumps(records[2]) + "\n")
        ignored = qualify_proc("run", "--run", run.name, "--only", "build", "--project", str(p.root))
        assert ignored.returncode in (0, 3), ignored.stdout + ignored.stderr
        # The leader's start time matches: the group is ended (this one is the test's own).
        assert stranger.poll() is not None or "ended group" in ignored.stdout + ignored.stderr
    finally:
        stranger.kill()
        stranger.wait()


def test_an_endless_output_line_is_cut_everywhere_it_is_kept(project: Callable[..., Project]) -> None:
    """A 64 MB line of output: the log, the tail and every record keep at most the cut line."""
    p = project(CONFIG)
    six(p, compile_code=0)
    stage(p, "numerics", f"{PY} -c \"import sys; sys.stdout.write('x' * (64 << 20)); sys.exit(1)\"")
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = p.run_dirs()
    sizes = {str(f.relative_to(run)): f.stat().st_size for f in run.rglob("*") if f.is_file()}
    assert max(sizes.values()) < 1 << 20, sizes
    log = next((run / "30-numerics").rglob("candidate-run.log")).read_text()
    assert "[line cut at 65536 bytes: " in log, log[-500:]
    assert len(done.stdout) < 1 << 20


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="mounting a tmpfs needs root")
def test_a_disk_that_fills_while_a_command_prints_is_an_error_that_names_the_folder(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    """The runs directory on a 2 MiB tmpfs; the check prints 32 MiB of lines into its log. The
    run ends with a named error, never a hang (the test's own timeout is the bound)."""
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], check=False)
    if mounted.returncode != 0:
        pytest.skip("this machine cannot mount a tmpfs")
    try:
        p = project(CONFIG)
        six(p, compile_code=0)
        stage(p, "numerics", f"{PY} -c \"import sys; [print('y' * 1000) for _ in range(32 << 10)]\"")
        done = subprocess.run(
            [
                PY,
                "-m",
                "qualify",
                "run",
                "--candidate",
                "cand",
                "--runs-dir",
                str(small),
                "--project",
                str(p.root),
            ],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        said = done.stdout + done.stderr
        assert done.returncode == 2, said
        assert "No space left on device" in said and str(small) in said, said
        assert "Traceback" not in said and "internal error" not in said, said
    finally:
        subprocess.run(["umount", "-l", str(small)], check=False)


@pytest.mark.parametrize("value", ["mout", "cgroup,mnt", "none", "Cgroup"])
def test_an_unknown_containment_value_is_refused_before_anything_runs(
    project: Callable[..., Project], value: str
) -> None:
    """A misspelt QUALIFY_CONTAINMENT would leave commands with less containment than asked
    for: the run is refused (exit 4), naming the variable, the value and what it accepts,
    before a run folder is made or a command starts."""
    p = project(CONFIG)
    started = p.root / "started"
    six(p, compile_code=0)
    stage(p, "build", f"{PY} -c \"open('{started}', 'w')\"")
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root), env=env_for(value))
    said = done.stdout + done.stderr
    assert done.returncode == 4, said
    assert "QUALIFY_CONTAINMENT" in said and repr(value) in said, said
    assert "cgroup" in said and "mount" in said, said
    assert "internal error" not in said, said
    assert not started.exists() and not p.runs.exists(), said
