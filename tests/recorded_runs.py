"""Re-deciding a recorded run folder with its example's plan, as `qualify report --rejudge` does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def rejudge(example: Path, run: Path) -> None:
    """`qualify report -C EXAMPLE --rejudge RUN` in a process of its own; it must succeed."""
    proc = subprocess.run(
        [sys.executable, "-m", "qualify", "report", "-C", str(example), "--rejudge", str(run)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
