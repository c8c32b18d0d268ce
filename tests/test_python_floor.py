"""The lowest Python pyproject allows, as a user has it: Debian 12's own 3.11.2 (where tarfile
has no extraction filter, which came in 3.11.4). The core is installed from the built wheel into
a virtual environment of that interpreter, and runs what a job without the stages' libraries
runs: `--version`, `show` of a recorded run, and `merge` of a host's run archive."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, built_wheel
from recorded_runs import unpack

FLOOR = Path("/usr/bin/python3.11")
RECORDED = REPO / "examples" / "llama-cpp-cuda" / "recorded" / "20261204-171520-cuda135.tar.xz"


def _version(python: Path) -> tuple[int, int, int]:
    out = subprocess.run(
        [str(python), "-c", "import sys; print(*sys.version_info[:3])"], capture_output=True, text=True
    )
    major, minor, micro = (int(x) for x in out.stdout.split())
    return major, minor, micro


@pytest.mark.slow
@pytest.mark.skipif(not FLOOR.is_file(), reason="no system Python 3.11 (Debian 12's) on this machine")
def test_the_core_runs_on_the_systems_python_3_11(tmp_path: Path) -> None:
    assert _version(FLOOR)[:2] == (3, 11)  # the floor pyproject names: requires-python >= 3.11
    wheel = built_wheel(tmp_path / "dist")
    env_dir = tmp_path / "venv"
    subprocess.run([str(FLOOR), "-m", "venv", "--without-pip", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr

    def qualify(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python), "-m", "qualify", *args], cwd=tmp_path, capture_output=True, text=True
        )

    assert qualify("--version").returncode == 0
    run = unpack(RECORDED, tmp_path / "recorded")
    shown = qualify("show", str(run))
    assert shown.returncode in (0, 1, 3), shown.stderr
    assert "NOT QUALIFIED" in shown.stdout and "internal error" not in shown.stdout + shown.stderr
    # A host's run as CI uploads it: a gzipped tar of its run folder.
    archive = tmp_path / "host.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname=run.name)
    merged = qualify("merge", str(archive), "--out", str(tmp_path / "fleet"))
    said = merged.stdout + merged.stderr
    assert "internal error" not in said and "filter" not in said, said
    assert merged.returncode in (0, 1, 3), said
    assert (tmp_path / "fleet" / "summary.md").is_file(), said
