"""Recorded run folders: unpacked from their archives, re-decided with their example's plan as
`qualify report --rejudge` does."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any


def rejudge(example: Path, run: Path) -> None:
    """`qualify report -C EXAMPLE --rejudge RUN` in a process of its own; it must succeed."""
    proc = subprocess.run(
        [sys.executable, "-m", "qualify", "report", "-C", str(example), "--rejudge", str(run)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


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


def rejudged_copy(example: Path, archive: Path, where: Path) -> Path:
    """A recorded run set unpacked under `where` and re-decided with EXAMPLE's plan."""
    run = unpack(archive, where)
    rejudge(example, run)
    return run


def assert_provenance(run: Path, revision: str, profile: str) -> None:
    """The set names the clean revision it qualified and the profile it ran."""
    saved = json.loads((run / "run.json").read_text())
    assert saved["provenance"]["git"] == {"rev": revision, "dirty": False}
    assert saved["profile"] == profile
