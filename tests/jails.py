"""qualify's containment as `qualify run` sets it up on a root host with bubblewrap: commands
dropped to nobody, in a cgroup, a PID namespace and a read-only mount of the run folder but for
its `stage/` (or the folder named). A test that needs it skips where the host cannot give it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from qualify.core import containment


@contextmanager
def as_nobody(
    root: Path, monkeypatch: pytest.MonkeyPatch, name: str, writable: str = "stage"
) -> Iterator[containment.Jail]:
    """Commands of the run in `root` contained as a run contains them, `root/writable` theirs
    to write."""
    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        pytest.skip("commands drop to another user in bubblewrap only where qualify runs as root with it")
    # The suite keeps root for commands (its folders are root's); these tests drop, as a run does.
    monkeypatch.setenv("QUALIFY_COMMAND_USER", "nobody")
    monkeypatch.chdir("/")
    (root / writable).mkdir(parents=True, exist_ok=True)
    root.parent.chmod(0o755)
    with containment.contained(root, name) as made, containment.writing(root / writable):
        if not (made.user.switched and made.box.bwrap):
            pytest.skip(f"this host's containment drops no user in bubblewrap ({made.describe()})")
        yield made
