"""What the tests read of this machine's processes: whether anything a test started outlived it."""

from __future__ import annotations

from pathlib import Path


def cmdline(entry: Path) -> str:
    """A /proc/PID entry's command line with spaces, or "" once the process is gone."""
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def running(fragment: str) -> list[str]:
    """The command lines of live processes that contain `fragment`."""
    lines = (cmdline(p) for p in Path("/proc").iterdir() if p.name.isdigit())
    return [line for line in lines if fragment in line]
