"""A child that runs while the caller works with it: a writer whose output the caller reads as
it comes (a scoring command writing into a named pipe). Like every child of qualify it runs in
its own process group, watched so that it never outlives qualify."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from qualify.core.children import kill_group
from qualify.core.outputpump import LineCallback, Pump
from qualify.core.process import Completed, launched
from qualify.core.runstore import now_iso


@dataclass
class Running:
    """A child started by `start`, running while the caller works with it."""

    argv: tuple[str, ...]
    process: subprocess.Popen[bytes]
    pump: Pump
    started_at: str
    start_s: float
    timeout_s: float | None
    timed_out: bool = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait(self) -> Completed:
        """Wait for it to end (its timer kills it at its timeout); what it did, as `run` says."""
        self.process.wait()
        self.pump.join(timeout=5)
        return Completed(
            argv=self.argv,
            returncode=self.process.returncode,
            duration_s=time.monotonic() - self.start_s,
            started_at=self.started_at,
            log=None,
            timed_out=self.timed_out,
            output_tail=tuple(self.pump.tail),
            timeout_s=self.timeout_s,
        )


@contextmanager
def start(
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str],
    cwd: Path | None = None,
    timeout_s: float | None = None,
    echo: LineCallback | None = None,
    on_line: Sequence[LineCallback] = (),
) -> Iterator[Running]:
    """Start `argv` in its own process group and hand it back while it runs (a writer whose
    output the caller reads as it comes); the group is ended when the block leaves, however it
    leaves, and when `timeout_s` passes."""
    with launched(argv, log=log, env=env, cwd=cwd, echo=echo, on_line=on_line, grace_s=1.0) as (proc, pump):
        running = Running(tuple(argv), proc, pump, now_iso(), time.monotonic(), timeout_s)

        def expire() -> None:
            if running.alive():
                running.timed_out = True
                kill_group(proc)

        timer = threading.Timer(timeout_s, expire) if timeout_s else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            yield running
        finally:
            if timer is not None:
                timer.cancel()
