"""A checked command that starts bubblewrap itself (the ROCm example enters its toolchain root so)
runs as it would outside qualify, while still seeing only its own processes and unable to write
the kernel's settings.

Real bubblewrap, util-linux and kernel namespaces; qualify's containment as `qualify run` sets it
up, as root with commands dropped to nobody. Nothing stands in for anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from jails import as_nobody

from qualify.core import containment, process

NESTED = ["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--", "sh", "-c"]


@pytest.fixture
def jail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[containment.Jail]:
    with as_nobody(tmp_path / "run", monkeypatch, "nested") as made:
        yield made


def test_a_command_may_start_bubblewrap_with_a_proc_of_its_own(jail: containment.Jail) -> None:
    code, out = process.capture([*NESTED, "echo $$; id -u"])
    assert code == 0, out
    pid, uid = out.split()
    assert pid in ("1", "2") and uid == "65534"  # the nested namespace's init or its child


def test_the_command_sees_its_own_processes_and_cannot_write_the_kernels_settings(
    jail: containment.Jail,
) -> None:
    code, out = process.capture(["sh", "-c", "ls /proc | grep -c '^[0-9]'; echo $$"])
    assert code == 0, out
    seen, pid = (int(w) for w in out.split())
    assert seen <= 4 and pid <= 3, out  # the namespace's first processes, not the host's hundreds
    code, out = process.capture(["sh", "-c", "echo '|/bin/false' > /proc/sys/kernel/core_pattern"])
    assert code != 0
    assert Path("/proc/sys/kernel/core_pattern").read_text().strip() != "|/bin/false"
