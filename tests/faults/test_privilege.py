"""A checked command holds no privilege over qualify: every way out it tries is refused, for real.

As root, the command used to keep root's capabilities inside bubblewrap: it could move itself
into the root cgroup (and outlive the run, rewriting records after qualify's end), enter
qualify's mount namespace with nsenter, write through /proc/<qualify>/root, remount the run
folder read-write in a mount namespace of its own, ptrace qualify, and write
/proc/sys/kernel/core_pattern. tests/faults/hostile.py tries each (and reads the seal key, and
writes the records directly) from the bench stage, aiming at the compile stage's FAIL, with
every value of QUALIFY_CONTAINMENT; then qualify itself runs as nobody, without a delegated
cgroup, where the command is of qualify's own user.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from privileged import (
    COMMAND_PY,
    HOSTILE,
    base_env,
    can_run_as_nobody,
    command_check,
    give_to_nobody,
    qualify,
    six,
    stage_file,
    start,
)
from test_containment import running_with

from qualify.core import cgroups, sealkey

pytestmark = [
    pytest.mark.slow,
    # With the machine to itself (tests/tiers.py): each hostile command races the run, its seal's
    # checks and its end-of-run sweep of what outlived a command; on two cores shared with other
    # tests the race goes otherwise (a role's command cut short, a child swept a moment late).
    pytest.mark.alone,
    pytest.mark.skipif(bool(can_run_as_nobody()), reason=str(can_run_as_nobody())),
]

#: Every value of QUALIFY_CONTAINMENT (None: unset, the default).
MODES = [None, "cgroup", "mount", "cgroup,mount", ""]


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A folder of the test's own that nobody can reach (pytest's are root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="qualify-privilege-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def hostile_project(base: Path, key: Path) -> tuple[Path, Path, Path]:
    """Six stages, compile FAILs for the candidate, bench runs the hostile command; the folder
    it reports in (anyone may write it) and the file qualify's pid is written to."""
    said = base / "said"
    said.mkdir()
    said.chmod(0o777)
    pid_file = base / "qualify.pid"
    root = six(base / "proj", compile_code=1)
    mount = cgroups.cgroup2_mount() or Path("/sys/fs/cgroup")
    hostile = f"{COMMAND_PY} {HOSTILE} {said} {{run_dir}} {pid_file} {mount} {key} tok-{{role}}"
    stage_file(root, "bench", command_check("bench", hostile))
    return root, said, pid_file


def run_hostile(
    root: Path, pid_file: Path, env: dict[str, str], *, as_nobody: bool = False
) -> tuple[int, str]:
    proc = start(root, env, "--no-gate", as_nobody=as_nobody)
    pid_file.write_text(str(proc.pid))
    pid_file.chmod(0o644)
    output, _ = proc.communicate(timeout=300)
    return proc.returncode, output


def assert_nothing_got_out(
    root: Path,
    said: Path,
    code: int,
    output: str,
    env: dict[str, str],
    *,
    as_nobody: bool = False,
    open_folder: bool = False,
) -> dict[str, str]:
    """Every try refused (each role's), nothing of the command alive after the run, and the
    compile stage still FAIL: the run NOT QUALIFIED, as it ended and as shown. `open_folder`: the
    command is of qualify's own user with no mount namespace, so the run folder and the seal key
    are its to write and read (what the run says it lacks): its writes are found by the seal,
    which stops the run; the ways out of its namespaces are refused still."""
    tries: dict[str, str] = {}
    for role in ("pinned", "candidate"):
        report = said / f"tok-{role}.json"
        assert report.is_file(), output
        tries.update({f"{role} {name}": how for name, how in json.loads(report.read_text()).items()})
    escaped = running_with("tok-candidate") + running_with("tok-pinned")
    for pid in escaped:
        os.kill(pid, signal.SIGKILL)
    assert not escaped, f"the command's child outlived the run: {escaped}"
    if open_folder:
        tries = {
            k: v for k, v in tries.items() if k.split()[1] not in ("seal-key", "record", "remount-userns")
        }
    assert all(how.startswith("refused") for how in tries.values()), {
        k: v for k, v in tries.items() if v == "done"
    }
    if not open_folder:  # (where the folder is open it writes during the run, as the seal finds)
        time.sleep(1)  # what an escaped child would write after the run, it would have by now
        assert not list(said.glob("*-escapee")), [p.read_text() for p in said.glob("*-escapee")]
    (run,) = [p for p in (root / "runs").iterdir() if (p / "run.json").is_file()]
    if open_folder:
        assert code == 2 and "tampered" in output and "20-compile" in output, output
    else:
        assert code == 1, output
        assert json.loads((run / "20-compile" / "stage.json").read_text())["verdict"] == "FAIL"
    shown = qualify("show", run.name, "--json", "--project", str(root), env=env, as_nobody=as_nobody)
    verdict = json.loads(shown.stdout[shown.stdout.index("{") :])["verdict"]
    assert verdict == ("INCOMPLETE" if open_folder else "NOT QUALIFIED"), shown.stdout  # tampered: unreadable
    return dict(json.loads((run / "run.json").read_text())["containment"])


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "default" if m is None else repr(m))
def test_a_command_of_a_root_run_gets_out_by_no_way_it_tries(reachable: Path, mode: str | None) -> None:
    """qualify as root, the command as nobody with no capabilities, in its own PID namespace:
    the cgroup, nsenter, /proc/<pid>/root, a remount, ptrace, core_pattern and the records
    themselves are all refused, and the child that tried to leave its cgroup ends with the run."""
    env = base_env(mode)
    key = sealkey.key_folder() / sealkey.KEY
    root, said, pid_file = hostile_project(reachable, key)
    code, output = run_hostile(root, pid_file, env)
    held = assert_nothing_got_out(root, said, code, output, env)
    assert "as nobody (uid 65534" in held["privileges"] and "no capabilities" in held["privileges"], held
    assert "PID namespace of their own" in held["privileges"], held
    if mode in (None, "mount", "cgroup,mount") and shutil.which("bwrap"):
        assert held["records"].startswith("read-only mount"), held
    else:
        assert held["records"].startswith("sealed"), held
        assert "a read-only run folder" in held["missing"], held


@pytest.mark.parametrize("mode", [None, ""], ids=["default", "''"])
def test_a_command_of_a_run_made_by_a_user_gets_out_by_no_way_it_tries(
    reachable: Path, mode: str | None
) -> None:
    """qualify as nobody (no delegated cgroup: the process tree holds the commands), the command
    of the same user: its PID namespace (bubblewrap's, or unshare's in a user namespace) hides
    qualify, so neither /proc/<pid>/root nor ptrace reaches it, as the same user otherwise
    could. Without bubblewrap the seal key's folder is the command's to read too: the run says
    so."""
    if mode is None and not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    state, home = reachable / "state", reachable / "home"
    env = base_env(mode, XDG_STATE_HOME=str(state), HOME=str(home))
    root, said, pid_file = hostile_project(reachable, state / "qualify" / sealkey.KEY)
    home.mkdir()
    give_to_nobody(reachable)
    said.chmod(0o777)
    code, output = run_hostile(root, pid_file, env, as_nobody=True)
    if "cannot make one here" in output or "cannot make namespaces here" in output:
        pytest.skip(f"this host gives a user no namespace: {output[-400:]}")
    assert (state / "qualify" / sealkey.KEY).is_file(), output
    exposed = mode == ""
    held = assert_nothing_got_out(root, said, code, output, env, as_nobody=True, open_folder=exposed)
    assert held["processes"].startswith("process tree"), held
    assert "a user of their own" in held["missing"], held
    assert "PID namespace of their own" in held["privileges"], held
    if exposed:
        assert "a seal key out of the commands' reach" in held["missing"], held
        assert "a read-only run folder" in held["missing"], held
    else:
        assert held["records"].startswith("read-only mount"), held


@pytest.mark.parametrize("user", [None, "no-such-user-here"], ids=["nobody", "unknown user"])
def test_a_project_the_command_user_cannot_reach_is_refused_before_anything_runs(
    tmp_path: Path, user: str | None
) -> None:
    """pytest's folders are root's alone (0700): as nobody, every command would fail on them with
    a bare "permission denied". The run is refused first, naming the folder and what to do; a
    QUALIFY_COMMAND_USER that names no user is refused naming the variable."""
    root = six(tmp_path / "proj", compile_code=0)
    env = base_env(None, **({"QUALIFY_COMMAND_USER": user} if user else {}))
    done = qualify("run", "--candidate", "cand", "--project", str(root), env=env)
    said = " ".join((done.stdout + done.stderr).split())
    assert "internal error" not in said, said
    if user is None:
        assert done.returncode == 2, said
        assert "cannot reach" in said and "is not searchable by that user" in said, said
        assert "QUALIFY_COMMAND_USER" in said, said
    else:
        assert done.returncode == 4 and "QUALIFY_COMMAND_USER='no-such-user-here'" in said, said
    assert not (root / "runs").exists(), said


def test_a_clone_lent_to_a_command_comes_back_whole(reachable: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pin's move runs the plan's command in a clone of the project, lent to the command's
    user: it edits and adds the project's files, but cannot rename or replace the clone's
    `.git` (qualify's git and nix then run in it as root), and a `.git` it plants further down,
    where nix would find it first, is refused. Everything is qualify's again afterwards."""
    from qualify.core import process
    from qualify.core.containment import contained, lending
    from qualify.core.environment import child_env
    from qualify.core.errors import QualifyError

    monkeypatch.delenv("QUALIFY_COMMAND_USER", raising=False)  # the default user: nobody
    run = reachable / "run"
    run.mkdir()
    work = Path(tempfile.mkdtemp(prefix="qualify-lend-"))  # root's alone, as the stage's scratch
    clone = work / "repo"
    (clone / ".git").mkdir(parents=True)
    (clone / ".git" / "config").write_text("[core]\n")
    (clone / "sub").mkdir()
    (clone / "flake.lock").write_text("{}")
    script = (
        "import os, pathlib\n"
        "root = pathlib.Path(os.getcwd())\n"
        "(root / 'flake.lock').write_text('moved')\n"
        "(root / 'new.nix').write_text('added')\n"
        "said = []\n"
        "for try_ in (lambda: os.rename(root / '.git', root / 'old-git'),\n"
        "             lambda: (root / '.git' / 'config').write_text('[core]\\nfsmonitor = evil')):\n"
        "    try:\n"
        "        try_(); said.append('done')\n"
        "    except OSError as exc:\n"
        "        said.append(f'refused: {exc}')\n"
        "print(said)\n"
    )
    try:
        with contained(run, "lend-test"), lending(clone):
            done = process.run([COMMAND_PY, "-c", script], log=None, env=child_env(), cwd=clone)
        assert done.ok, done.output_tail
        assert done.output_tail[-1].count("refused") == 2, done.output_tail
        assert (clone / "flake.lock").read_text() == "moved" and (clone / "new.nix").read_text() == "added"
        assert (clone / ".git" / "config").read_text() == "[core]\n"
        owners = {p.stat().st_uid for p in [clone, *clone.rglob("*")]}
        assert owners == {0}, owners
        assert clone.stat().st_mode & 0o7777 == 0o755
        with pytest.raises(QualifyError, match=r"sub/\.git"), contained(run, "lend-test"), lending(clone):
            planted = "import pathlib; pathlib.Path('sub/.git').mkdir()"
            assert process.run([COMMAND_PY, "-c", planted], log=None, env=child_env(), cwd=clone).ok
    finally:
        shutil.rmtree(work, ignore_errors=True)
