"""Reading a file a command wrote, up to a size qualify is ready to hold.

A check's command writes files qualify then reads whole (metrics JSON to `{out_file}`, JUnit
XML, qualify.toml and the stage files a project brings): a command gone wrong can write
gigabytes, and reading them whole would take the run's memory before any judgement. Each reader
names its cap; a file over it is refused, naming the file, its size and the cap, after reading
at most one byte past the cap (a file that grows while it is read, or one whose size the file
system does not tell, is caught by what was read, not by its size).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class FileTooLarge(ValueError):
    """A file over the cap its reader sets: the message names the file, its size and the cap."""

    def __init__(self, path: Path, what: str, size: int | None, cap: int) -> None:
        self.path, self.size, self.cap = path, size, cap
        held = f"{size_words(size)} ({size} bytes)" if size is not None else "larger than that"
        super().__init__(
            f"{path}: {what} is {held}, more than the {size_words(cap)} ({cap} bytes) qualify reads"
        )


def size_words(size: int) -> str:
    """1.0 GiB, 16 MiB, 512 bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.0f} {unit}" if value.is_integer() else f"{value:.1f} {unit}"
    return f"{size} bytes"


def read_capped(path: Path, cap: int, what: str = "the file") -> bytes:
    """`path`'s bytes, when there are at most `cap` of them; else FileTooLarge. A path that is
    not a regular file (a pipe would block, a device never ends) is refused as ValueError;
    OSError (FileNotFoundError included) passes to the caller, who knows what a missing file
    means."""
    # stat before open: opening a FIFO for reading waits for a writer that may never come.
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path}: {what} is not a regular file")
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise FileTooLarge(path, what, size, cap)
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise FileTooLarge(path, what, None, cap)
    return data
