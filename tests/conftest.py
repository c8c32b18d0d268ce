"""Shared fixtures: small real projects on disk, and qualify run as a real process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from recorded_runs import Rejudge, rejudge

from qualify import kinds

# Tests call the spine directly (plans, stage runs) as well as through the CLI.
kinds.install()

# Started in the background of a script (`make test &`, nohup), the suite inherits SIGINT
# ignored, and an ignored signal stays ignored in every process it starts: the tests that stop a
# run or a child with Ctrl-C would wait out their timeouts and leave the run behind. A handler
# here (before pytest-xdist starts its workers) makes every child start with the default again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# tiers: the marks tests get from their fixtures, and the check tier's guards (tests/tiers.py);
# pytester runs small suites in tests/test_tiers.py.
pytest_plugins = ["tiers", "pytester"]

PY = sys.executable
# As root, qualify runs checked commands as nobody (`qualify.core.commanduser`). The commands
# the tests write run this interpreter and live in pytest's temporary folders, which are root's
# alone (mode 0700), so the suite keeps them root's; tests/faults/test_privilege.py runs commands
# as the default user, from folders that user can reach.
if os.geteuid() == 0:
    os.environ.setdefault("QUALIFY_COMMAND_USER", "root")
# The tests that install qualify into a fresh venv (the wheel, the oldest Python, the CI
# workflow's install steps; about ten installs) leave pip's byte-compiling of every installed
# module out: 19 of an install's 33 seconds here, for files Python compiles on first import
# anyway. What gets installed, and how each test uses it, is unchanged. pip reads PIP_COMPILE as
# its --compile flag; the workflow's runner passes the PIP_ settings on (test_ci_workflow.base_env).
os.environ.setdefault("PIP_COMPILE", "0")
REPO = Path(__file__).resolve().parent.parent
#: An interpreter the default command user (nobody) can run, for the commands of tests that run
#: as that user: the suite's own lives under /root. Commands it runs use the stdlib only.
COMMAND_PY = "/usr/bin/python3"


def can_run_as_nobody() -> str | None:
    """Why qualify cannot run a test's commands as nobody here, or None."""
    if os.geteuid() != 0:
        return "qualify gives commands another user only as root"
    if not Path(COMMAND_PY).is_file() or shutil.which("setpriv") is None:
        return f"{COMMAND_PY} and setpriv (util-linux) are needed"
    return None


DEFAULT_CONFIG = """
[arms.pinned]
installable = ".#default"
vars = { level = 6 }

[arms.cand]
installable = ".#cand"
vars = { level = 9 }
"""


@dataclass
class Project:
    root: Path

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def stage(self, filename: str, body: str) -> Path:
        path = self.root / "stages" / filename
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(body).replace("{py}", PY))
        return path

    def script(self, name: str, body: str) -> Path:
        path = self.root / name
        path.write_text(textwrap.dedent(body))
        return path

    def run_dirs(self) -> list[Path]:
        return sorted(p for p in self.runs.iterdir() if (p / "run.json").exists())


@pytest.fixture
def project(tmp_path: Path) -> Callable[..., Project]:
    """A project directory with qualify.toml and a plan written by the test."""

    made: list[Path] = []

    def make(config: str = DEFAULT_CONFIG, plan: bool = True) -> Project:
        root = tmp_path / ("proj" if not made else f"proj{len(made) + 1}")
        root.mkdir()
        made.append(root)
        header = 'plan = "stages"\n' if plan else ""
        (root / "qualify.toml").write_text(header + textwrap.dedent(config))
        (root / "stages").mkdir()
        return Project(root)

    return make


def qualify_proc(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run qualify as a real process (the console script's code path)."""
    env = {**(env if env is not None else os.environ), "COLUMNS": "200"}
    return subprocess.run(
        [PY, "-m", "qualify", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


def command_stage(name: str, run: str, **extra: str) -> str:
    """A stage file body holding one `command` check."""
    lines = [f'name = "{name}"']
    for key, value in extra.items():
        if key == "inconclusive":
            lines.append(f'inconclusive = "{value}"')
    lines += ["[[check]]", 'kind = "command"', f'name = "{name}-check"', f"run = '''{run}'''"]
    for key, value in extra.items():
        if key != "inconclusive":
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def nix_flakes() -> dict[str, str]:
    """The environment to run real nix in, with flakes enabled (tests/nixflakes.py's settings);
    skips where nix is not installed. A test using it is marked nix (tests/tiers.py)."""
    from nixflakes import NIX_CONFIG

    if shutil.which("nix") is None:
        pytest.skip("nix is not installed")
    return {**os.environ, "NIX_CONFIG": NIX_CONFIG}


@pytest.fixture(scope="session")
def rejudge_recorded() -> Rejudge:
    """`qualify report --rejudge` on one of the examples' recorded runs (tests/recorded_runs.py):
    tens of seconds to minutes each on 2 cores, so a test using it is marked slow
    (tests/tiers.py)."""
    return rejudge


@pytest.fixture(scope="module")
def rocm_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/nixflakes.py's engine, one per module: a committed git project whose arms build
    through real nix against two fixture inputs named like the ROCm stack, with a plan of the
    build stage alone. Marked nix (tests/tiers.py); skips where nix is not installed."""
    from nixflakes import have_nix, make_rocm_project

    if not have_nix():
        pytest.skip("nix is not installed")
    plan = '[[check]]\nkind = "nix-build"\nname = "arms"\n'
    return make_rocm_project(tmp_path_factory.mktemp("rocm"), 'name = "build"\n' + plan)


@pytest.fixture(scope="session")
def example_outs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example's arms (pinned, clang19, reference) built through nix, once per test run."""
    from example_arms import build_arms

    return build_arms(tmp_path_factory.mktemp("example-gcroots"))


@pytest.fixture(scope="session")
def example_runs(
    example_outs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[int, Path, str]]:
    """One run set of the example's quick profile: `--candidate clang19 --no-gate` with the
    project's controls (pinned against itself, and kvq4 for numerics), as a user runs it.

    "set" is the set's (exit code, folder, output); "clang19", "aa" and "kvq4" are each member's
    (its own exit code, its run folder, the set's output). `--allow-dirty` lets the suite run in
    a working copy with local changes; on a clean checkout (CI) it changes nothing.
    """
    from example_arms import qualify_run

    runs = tmp_path_factory.mktemp("example-runs")
    code, run_dir, out = qualify_run(runs, "--candidate", "clang19", "--no-gate", "--allow-dirty")
    found = {"set": (code, run_dir, out)}
    for name, label in (("clang19", "clang19"), ("aa", "positive-pinned"), ("kvq4", "negative-kvq4")):
        member = run_dir / label
        saved = json.loads((member / "run.json").read_text()) if (member / "run.json").is_file() else {}
        found[name] = (int(saved.get("exit_code", -1)), member, out)
    return found


@pytest.fixture(scope="session")
def example_kvq4_run(example_runs: dict[str, tuple[int, Path, str]]) -> tuple[int, Path, str]:
    """The negative control: the kvq4 arm (pinned's build, q4_0 KV cache) as the candidate, run
    by the set for the build and numerics stages only. It comes after the other members, so the
    reference's artifact comes from the numerics cache."""
    return example_runs["kvq4"]


def built_wheel(folder: Path) -> Path:
    """The checkout built as a wheel into `folder` (no build isolation: the venv has the backend)."""
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(folder), str(REPO)],
        check=True,
        capture_output=True,
    )
    return next(folder.glob("qualify-*.whl"))
