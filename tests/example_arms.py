"""The bundled example's arms, built once per test run, and the runs made on them.

Building llama.cpp takes minutes per compiler, so one session-scoped fixture builds the three
arms (the nix store caches them across runs) and one run set of the quick profile is made once:
gcc vs clang with --no-gate, with the project's controls (A/A for every stage, and the kvq4
negative control for numerics). Stage tests assert on its saved member runs instead of running
the engine again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from nixflakes import NIX_CONFIG
from tiers import require

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "llama-cpp"
ATTRS = {"pinned": "default", "clang19": "clang19", "reference": "reference"}

#: Marks of a test that needs the example's arms built through nix (as `pytestmark`).
EXAMPLE_MARKS = [
    pytest.mark.nix,
    pytest.mark.example,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="nix is not installed"),
]


def example_marks(test: Callable[..., None]) -> Callable[..., None]:
    """The same marks on one test of a module that also has tests without nix."""
    for mark in EXAMPLE_MARKS:
        test = mark(test)
    return test


def example_env() -> dict[str, str]:
    return {**os.environ, "NIX_CONFIG": os.environ.get("NIX_CONFIG", NIX_CONFIG), "COLUMNS": "160"}


def ensure_setup() -> None:
    require("model", "makes the example's model and corpus")
    if (
        not (EXAMPLE / "data" / "corpus.txt").is_file()
        or not (EXAMPLE / "data" / "gemma-3-270m-q4_k_m.gguf").is_file()
        # The distribution stage's signing key, which a run asks for before it starts.
        or not (EXAMPLE / ".qualify" / "cache-key.sec").is_file()
    ):
        subprocess.run(
            [str(EXAMPLE / "setup.sh")], env={**example_env(), "PYTHON": sys.executable}, check=True
        )


def build_arms(gcroots: Path) -> dict[str, Path]:
    """nix build of every arm, with GC roots in `gcroots`; returns arm -> store path."""
    require("example", "builds the llama.cpp example")
    ensure_setup()
    outs: dict[str, Path] = {}
    for arm, attr in ATTRS.items():
        done = subprocess.run(
            ["nix", "build", f"{EXAMPLE}#{attr}", "--json", "--out-link", str(gcroots / arm)],
            env=example_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"building the example's {arm} arm failed:\n{done.stderr[-3000:]}")
        outs[arm] = Path(json.loads(done.stdout)[0]["outputs"]["out"])
    return outs


def qualify_run(runs_dir: Path, *args: str, project: Path = EXAMPLE) -> tuple[int, Path, str]:
    require("example", "runs qualify on the llama.cpp example")
    before = set(runs_dir.glob("*")) if runs_dir.exists() else set()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "qualify",
            "run",
            "-C",
            str(project),
            "--runs-dir",
            str(runs_dir),
            "--profile",
            "quick",
            *args,
        ],
        env=example_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    # The numerics check keeps its reference cache in runs/.cache: not a run.
    [run_dir] = {p for p in set(runs_dir.glob("*")) - before if not p.name.startswith(".")}
    return done.returncode, run_dir, done.stdout + done.stderr


def numerics_project(root: Path, limits: str) -> Path:
    """The example's project with a plan of its build and numerics stages only, the numerics
    limits replaced by `limits`, and kvq4 as its only control (a negative one, for numerics)."""
    root.mkdir(parents=True, exist_ok=True)
    config = (EXAMPLE / "qualify.toml").read_text()
    config = config.replace('flake = "."', f'flake = "{EXAMPLE}"').replace("{project}", str(EXAMPLE))
    config = config.replace('positive = ["pinned"]\n', "")
    (root / "qualify.toml").write_text(config)
    (root / "stages").mkdir(exist_ok=True)
    (root / "stages" / "10-build.toml").write_text((EXAMPLE / "stages" / "10-build.toml").read_text())
    numerics = (EXAMPLE / "stages" / "30-numerics.toml").read_text()
    start = numerics.index("limits = {")
    end = numerics.index("\n", start)
    (root / "stages" / "30-numerics.toml").write_text(
        numerics[:start] + f"limits = {{ {limits} }}" + numerics[end:]
    )
    return root
