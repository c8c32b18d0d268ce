"""What the privilege tests share: a project in a folder the command user can reach, commands
run by an interpreter that user can run, and qualify started as a real process (as root, or as
that user).

qualify as root runs checked commands as nobody (uid 65534). The suite's interpreter lives under
/root (pyenv) and pytest's folders are root's alone (mode 0700), so these tests make their
projects in a folder of their own under /tmp (mode 0755) and run their commands with Debian's
/usr/bin/python3, which nobody can run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import COMMAND_PY, PY, REPO, can_run_as_nobody

__all__ = ["COMMAND_PY", "can_run_as_nobody"]

NOBODY = 65534
STAGES = ("build", "compile", "numerics", "serving", "soak", "bench")
CONFIG = """
plan = "stages"
[arms.pinned]
installable = ".#default"
vars = { speed = "120,121,122" }

[arms.cand]
installable = ".#cand"
vars = { speed = "90,91,92" }
"""
#: Exits with the code given, for the candidate only.
CHECK = "import sys; sys.exit(int(sys.argv[2]) if sys.argv[1] == 'candidate' else 0)"
HOSTILE = Path(__file__).resolve().parent / "hostile.py"
EMIT = REPO / "tests" / "helpers" / "emit_metrics.py"


def base_env(containment: str | None, **extra: str) -> dict[str, str]:
    """The environment qualify runs in: the default command user, `containment` as
    QUALIFY_CONTAINMENT (None: unset, both)."""
    env = {k: v for k, v in os.environ.items() if k not in ("QUALIFY_CONTAINMENT", "QUALIFY_COMMAND_USER")}
    if containment is not None:
        env["QUALIFY_CONTAINMENT"] = containment
    return {**env, "COLUMNS": "200", **extra}


def stage_file(root: Path, name: str, body: str) -> None:
    index = STAGES.index(name) + 1
    (root / "stages" / f"{index}0-{name}.toml").write_text(textwrap.dedent(body))


def command_check(name: str, run: str, extra: str = "") -> str:
    return f"name = \"{name}\"\n[[check]]\nkind = \"command\"\nname = \"{name}-check\"\nrun = '''{run}'''\n{extra}"


def six(root: Path, compile_code: int) -> Path:
    """A project of six command stages at `root`, all passing but compile (exit `compile_code`
    for the candidate), its commands run by COMMAND_PY."""
    root.mkdir(mode=0o755)
    (root / "stages").mkdir(mode=0o755)
    (root / "qualify.toml").write_text(CONFIG)
    (root / "check.py").write_text(CHECK)
    for name in STAGES:
        code = compile_code if name == "compile" else 0
        stage_file(root, name, command_check(name, f"{COMMAND_PY} {root / 'check.py'} {{role}} {code}"))
    return root


def _as(argv: list[str], env: dict[str, str], as_nobody: bool) -> tuple[list[str], dict[str, str]]:
    """`argv` (qualify in this interpreter) as it runs as nobody where `as_nobody`: through
    setpriv, with Debian's interpreter and the test's own libraries."""
    if not as_nobody:
        return argv, env
    site = next(p for p in sys.path if p.endswith("site-packages"))
    drop = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    return [*drop, COMMAND_PY, *argv[1:]], {**env, "PYTHONPATH": f"{REPO}:{site}"}


def start(root: Path, env: dict[str, str], *args: str, as_nobody: bool = False) -> subprocess.Popen[str]:
    """`qualify run --candidate cand ARGS` on the project at `root`, started."""
    argv = [PY, "-m", "qualify", "run", "--candidate", "cand", *args, "--project", str(root)]
    argv, env = _as(argv, env, as_nobody)
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def qualify(*args: str, env: dict[str, str], as_nobody: bool = False) -> subprocess.CompletedProcess[str]:
    argv, env = _as([PY, "-m", "qualify", *args], env, as_nobody)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


def give_to_nobody(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        os.lchown(path, NOBODY, NOBODY)
