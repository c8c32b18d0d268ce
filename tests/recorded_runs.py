"""Recorded run folders: unpacked from their archives, re-decided with their example's plan as
`qualify report --rejudge` does.

Re-deciding one of the examples' recorded runs takes from tens of seconds to minutes on 2 cores
(its numerics are bootstrapped again, its kernels compared again): a test does it through the
`rejudge_recorded` fixture (tests/conftest.py), which tests/tiers.py marks slow."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any, Protocol


class Rejudge(Protocol):
    """What the `rejudge_recorded` fixture gives: `rejudge` below."""

    def __call__(self, example: Path, run: Path, env: dict[str, str] | None = None) -> Path: ...


def rejudge(example: Path, run: Path, env: dict[str, str] | None = None) -> Path:
    """`qualify report -C EXAMPLE --rejudge RUN` in a process of its own (in `env` where given);
    it must succeed. Returns RUN."""
    proc = subprocess.run(
        [sys.executable, "-m", "qualify", "report", "-C", str(example), "--rejudge", str(run)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run


def unpack(archive: Path, where: Path) -> Path:
    """Unpack a recorded run's archive (NAME.tar.xz holding the folder NAME) under `where`."""
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
    return where / archive.name.removesuffix(".tar.xz")


def bench_tests(run: Path, member: str) -> dict[str, Any]:
    """The bench check's per-test findings of one member of a recorded run set."""
    result = json.loads((run / member / "60-bench" / "llama-bench" / "result.json").read_text())
    tests: dict[str, Any] = result["facts"]["tests"]
    return tests


def check_result(run: Path, member: str, stage: str, check: str) -> dict[str, Any]:
    """One check's saved result.json in a member of a recorded run set."""
    saved: dict[str, Any] = json.loads((run / member / stage / check / "result.json").read_text())
    return saved


def assert_provenance(run: Path, revision: str, profile: str) -> None:
    """The set names the clean revision it qualified and the profile it ran."""
    saved = json.loads((run / "run.json").read_text())
    assert saved["provenance"]["git"] == {"rev": revision, "dirty": False}
    assert saved["profile"] == profile
