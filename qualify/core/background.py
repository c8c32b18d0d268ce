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
from datetime import UTC, datetime
from pathlib import Path

from qualify.core.environment import redact_env
from qualify.core.groups import GroupWatch, group_alive
from qualify.core.process import Completed, LineCallback, _Pump, _spawn, command_line, kill_group


@dataclass
class Running:
    """A child started by `start`, running while the caller works with it."""

    argv: tuple[str, ...]
    process: subprocess.Popen[bytes]
    pump: _Pump
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
    shown = command_line(argv, env)
    if echo:
        echo(f"$ {shown} &")
    log.parent.mkdir(parents=True, exist_ok=True)
    log_file = log.open("a", encoding="utf-8")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    log_file.write(f"$ {shown} &\n# cwd: {cwd or Path.cwd()}\n# started: {started_at}\n")
    log_file.write(f"# env: {redact_env(env)}\n")
    log_file.flush()
    proc = _spawn(argv, env=env, cwd=cwd, stdin=None)
    try:
        watch = GroupWatch(proc.pid, argv)
    except BaseException:
        kill_group(proc)
        log_file.close()
        raise
    assert proc.stdout is not None
    pump = _Pump(proc.stdout, log_file, on_line, 40)
    pump.start()
    running = Running(tuple(argv), proc, pump, started_at, time.monotonic(), timeout_s)

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
        if group_alive(proc.pid):
            kill_group(proc, grace_s=1.0)
        proc.wait()
        watch.release()
        pump.join(timeout=5)
        log_file.write(f"# ended: {proc.returncode} after {time.monotonic() - running.start_s:.3f} s\n")
        log_file.close()
