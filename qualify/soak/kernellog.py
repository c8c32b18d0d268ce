"""The kernel log during a soak: a watcher that saves every new line, and the GPU driver patterns
the judge fails on.

The watcher reads `/dev/kmsg` (one record per read, from the end, so only lines written during
the role are seen) and falls back to `dmesg --follow-new` through the process runner when kmsg
cannot be opened. It saves lines only; matching happens in the judge, from the saved file, so a
run can be re-judged with new patterns.

Patterns (each from the driver messages quoted in the issues named beside it) cover GPU page
faults, ring timeouts, resets, MES failures, KFD queue eviction and preemption failures, and
NVIDIA Xid. The HSA runtime's "Memory access fault by GPU node" goes to the server's own
stderr, so `server_patterns` are matched against the server log instead.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import threading
import time
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from qualify.core import process

#: Lines kept per role; a flood beyond this is itself recorded (`dropped`).
MAX_LINES = 100_000


@dataclass(frozen=True)
class Pattern:
    name: str
    regex: re.Pattern[str]
    source: str


def _p(name: str, regex: str, source: str) -> Pattern:
    return Pattern(name, re.compile(regex), source)


KERNEL_PATTERNS: tuple[Pattern, ...] = (
    _p(
        "GPU page fault",
        r"\[(gfx|mm)hub\d*\] (no-)?retry page fault|\[(gfx|mm)hub\d*\] (VMC )?page fault"
        r"|G?C?VM_L2_PROTECTION_FAULT_STATUS",
        "ROCm/legacy-rocm-build#6139, #6157, #2766; ROCm/amdgpu#172; CachyOS/linux-cachyos#960",
    ),
    _p(
        "ring timeout",
        r"ring \S+ timeout, signaled seq=\d+, emitted seq=\d+|amdgpu_job_timedout"
        r"|Fence fallback timer expired",
        "ggml-org/llama.cpp#21724; freebsd/drm-kmod#387",
    ),
    _p(
        "GPU reset",
        r"GPU reset begin|GPU reset(\(\d+\))? succeeded|MODE[12] reset|BACO reset|[Rr]ing \S+ reset"
        r"|device wedged",
        "lemonade-sdk/llamacpp-rocm#122; ggml-org/llama.cpp#21724",
    ),
    _p(
        "MES failure",
        r"MES failed to respon(d|se)|MES might be in unrecoverable state|failed to unmap legacy queue"
        r"|failed to remove hardware queue",
        "ROCm/legacy-rocm-build#5724, #6273, #2196; freebsd/drm-kmod#387",
    ),
    _p(
        "KFD eviction or preemption failure",
        r"Failed to evict (process )?queues?|Failed to quiesce KFD|Failed to restore process queues"
        r"|Queue preemption time out|queue evicted",
        "ollama/ollama#738; ROCm/legacy-rocm-build#5724, #1744",
    ),
    _p(
        "NVIDIA Xid",
        r"NVRM: Xid \(PCI:[^)]+\): (\d+)|has fallen off the bus|fallen off the bus",
        "docs.nvidia.com/deploy/xid-errors; leptonai/gpud#46; NVIDIA/NVSentinel#155",
    ),
)

SERVER_PATTERNS: tuple[Pattern, ...] = (
    _p("HSA memory access fault", r"Memory access fault by GPU node", "ROCm/legacy-rocm-build#6139"),
)


@dataclass(frozen=True)
class Match:
    pattern: str
    line: str
    source: str

    def as_json(self) -> dict[str, str]:
        return {"pattern": self.pattern, "line": self.line, "source": self.source}


# The process a driver line names: amdgpu's "for process NAME pid TGID thread NAME pid TID"
# (the first pid is the process) and NVIDIA's "Xid (...): 13, pid='1234', name=...".
_LINE_PID = re.compile(r"for process \S+ pid (\d+)|\bpid='?(\d+)'?")


def line_pid(line: str) -> int | None:
    """The process id a driver line names, when it names one."""
    match = _LINE_PID.search(line)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def attribute(matches: list[dict[str, Any]], pids: Mapping[str, set[int]]) -> list[dict[str, Any]]:
    """Matched lines (`role`, `log`, `line`, …) with each kernel-log line moved to the role whose
    server process it names, if another role's: the line was saved by the role under load, but
    with interleaved roles both servers are up. A server's own log is its own. A line saved by
    several roles (run concurrently, every role watches the one kernel log) is kept once per role
    it ends up with: once for the role it names, once for each role when it names none."""
    out = []
    seen: set[tuple[str, str, str]] = set()
    for match in matches:
        pid = line_pid(match["line"]) if match["log"] == "kernel" else None
        # One owner only: run one after the other, the second server may reuse a pid of the first.
        owners = [r for r, group in pids.items() if pid in group]
        moved = len(owners) == 1 and owners[0] != match["role"]
        kept = {**match, "role": owners[0], "moved_from": match["role"]} if moved else match
        key = (kept["role"], kept["log"], kept["line"])
        if key not in seen:
            seen.add(key)
            out.append(kept)
    return out


def match_lines(lines: Iterable[str], patterns: Iterable[Pattern] = KERNEL_PATTERNS) -> list[Match]:
    """Every line that matches a pattern, with the first pattern it matched."""
    compiled = tuple(patterns)
    found: list[Match] = []
    for line in lines:
        for pattern in compiled:
            if pattern.regex.search(line):
                found.append(Match(pattern.name, line.rstrip("\n"), pattern.source))
                break
    return found


def kmsg_text(record: bytes) -> str:
    """The message of one /dev/kmsg record ("prio,seq,usec,flags;message\\n KEY=value...")."""
    text = record.decode("utf-8", errors="replace")
    _, semicolon, message = text.partition(";")
    return (message if semicolon else text).split("\n", 1)[0]


class KernelLogWatcher:
    """Saves new kernel-log lines to `path` while it runs (a context manager).

    `source` says how the log was read ("/dev/kmsg", "dmesg --follow-new") or is None when it could
    not be read at all, with `unavailable` saying why — a soak without its kernel-log watcher
    still runs, and the report says the kernel log was not watched.
    """

    def __init__(
        self, path: Path, *, dmesg_log: Path, env: dict[str, str], kmsg: Path = Path("/dev/kmsg")
    ) -> None:
        self.path = path
        self.kmsg = kmsg
        self.dmesg_log = dmesg_log
        self.env = env
        self.source: str | None = None
        self.unavailable: str | None = None
        self.lines = 0
        self.dropped = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stack = ExitStack()
        self._out: IO[str] | None = None

    def __enter__(self) -> KernelLogWatcher:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._out = self._stack.enter_context(self.path.open("a", encoding="utf-8"))
        try:
            fd = os.open(self.kmsg, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            reason = f"{self.kmsg}: {exc.strerror}"
        else:
            os.lseek(fd, 0, os.SEEK_END)  # only what is written from now on
            self.source = str(self.kmsg)
            self._thread = threading.Thread(target=self._read_kmsg, args=(fd,), daemon=True)
            self._thread.start()
            return self
        if shutil.which("dmesg", path=self.env.get("PATH")) is None:
            self.unavailable = reason + "; dmesg not found"
            return self
        try:
            server = self._stack.enter_context(
                process.serve(
                    ["dmesg", "--follow-new"],
                    log=self.dmesg_log,
                    env=self.env,
                    ready=lambda: True,
                    ready_timeout_s=5.0,
                )
            )
        except Exception as exc:  # any failure here means "not watched", never a crash
            self.unavailable = f"{reason}; dmesg --follow-new: {exc}"
            return self
        self.source = "dmesg --follow-new"
        start = self.dmesg_log.stat().st_size
        self._thread = threading.Thread(target=self._tail_dmesg, args=(server, start), daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._stack.close()

    def _write(self, line: str) -> None:
        if self.lines >= MAX_LINES:
            self.dropped += 1
            return
        assert self._out is not None
        self._out.write(line + "\n")
        self._out.flush()
        self.lines += 1

    def _read_kmsg(self, fd: int) -> None:
        try:
            while not self._stop.is_set():
                try:
                    record = os.read(fd, 8192)  # kmsg returns exactly one record per read
                except BlockingIOError:
                    time.sleep(0.2)
                    continue
                except OSError as exc:
                    if exc.errno == errno.EPIPE:  # overwritten before we read it: records lost
                        self.dropped += 1
                        continue
                    raise
                self._write(kmsg_text(record))
        finally:
            os.close(fd)

    def _tail_dmesg(self, server: process.Server, start: int) -> None:
        # The runner writes the child's output to its log; follow that file (lines starting
        # with "#" or "$" are the runner's own header).
        with self.dmesg_log.open("r", encoding="utf-8", errors="replace") as log:
            log.seek(start)
            while not self._stop.is_set():
                line = log.readline()
                if not line:
                    if not server.alive():
                        return
                    time.sleep(0.2)
                    continue
                if not line.startswith(("#", "$ ")):
                    self._write(line.rstrip("\n"))
