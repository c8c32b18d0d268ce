"""A folder made read-only for a test, whoever runs the suite."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` (made if missing) read-only while the block runs: chmod where that binds (not
    root), else a read-only bind mount of it (root ignores file modes)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
        return
    if subprocess.run(["mount", "--bind", str(folder), str(folder)], check=False).returncode != 0:
        pytest.skip("root cannot make a read-only folder here (no bind mount)")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True)
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)
