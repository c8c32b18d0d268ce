"""The one process runner: every child process of qualify starts here.

Each child gets its own process group (so a timeout or Ctrl-C kills the whole tree, not just
the shell on top), its output goes line by line to a log file (and to optional callbacks, e.g.
a live progress display), and the command line is echoed as `$ cmd` first. Arguments are lists,
never shell strings. Long-lived servers go through `serve()`, a context manager that always
tears the group down.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from qualify.core import proctree
from qualify.core.children import Child, open_log, raise_unwritten, spawn
from qualify.core.errors import QualifyError, ToolMissing
from qualify.core.groups import KILL_GRACE_S
from qualify.core.groups import GroupWatch as _GroupWatch
from qualify.core.outputpump import LineCallback, Pump, read_bounded
from qualify.core.recordredaction import redact_argv, redact_env
from qualify.core.secretsources import remember_named


@dataclass(frozen=True)
class Completed:
    """What a finished child did."""

    argv: tuple[str, ...]
    returncode: int
    duration_s: float
    started_at: str
    log: Path | None
    timed_out: bool
    output_tail: tuple[str, ...]
    stdout: str | None = None  # only with `separate_stdout`; the log then holds stderr
    timeout_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        if self.timed_out:
            limit = f"its {self.timeout_s:g} s limit" if self.timeout_s is not None else "its limit"
            return f"timed out: stopped at {limit} (ended {self.duration_s:.1f} s after its start)"
        if self.returncode < 0:
            return f"killed by signal {-self.returncode}"
        return f"exit code {self.returncode}"

    def as_json(self) -> dict[str, object]:
        return {
            "argv": recorded_argv(self.argv),  # saved in measurement.json: never a secret in clear
            "returncode": self.returncode,
            "duration_s": round(self.duration_s, 3),
            "started_at": self.started_at,
            "log": str(self.log) if self.log else None,
            "timed_out": self.timed_out,
        }


def recorded_argv(argv: Sequence[str]) -> list[str]:
    """A command line as a record may keep it (measurement.json, processes.jsonl): secrets redacted."""
    return redact_argv(argv)


def command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The command line as it is echoed and logged: secrets redacted (`qualify.core.redaction`),
    the values of `env`'s secret variables among them."""
    return shlex.join(redact_argv(argv, env))


def run(
    argv: Sequence[str],
    *,
    log: Path | None,
    env: Mapping[str, str],
    cwd: Path | None = None,
    timeout_s: float | None = None,
    echo: LineCallback | None = None,
    on_line: Sequence[LineCallback] = (),
    stdin: IO[bytes] | None = None,
    tail: int = 40,
    separate_stdout: bool = False,
    privileged: bool = False,
) -> Completed:
    """Run `argv` to completion in its own process group.

    Output (stdout and stderr merged) is appended to `log`, headed by the command line and the
    child's environment (secrets redacted). With `separate_stdout` (a tool whose stdout is
    data, such as `nix build --json`), stdout is returned whole in `Completed.stdout` and only
    stderr goes to the log and callbacks. On timeout the group is killed and the result says
    `timed_out`; on KeyboardInterrupt the group is killed and the interrupt propagates.
    `privileged`: the command keeps qualify's user inside a run (nix, which writes the store as
    its owner; `qualify.core.commanduser`); every other command runs without privilege.
    """
    remember_named(env)  # its secrets' values are redacted wherever they appear from now on
    shown = command_line(argv, env)
    if echo:
        echo(f"$ {shown}")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    log_file: IO[str] | None = None
    if log is not None:
        log_file = open_log(log)
        log_file.write(f"$ {shown}\n# cwd: {cwd or Path.cwd()}\n# started: {started_at}\n")
        log_file.write(f"# env: {redact_env(env)}\n")
        log_file.flush()
    start = time.monotonic()
    timed_out = False
    watch: _GroupWatch | None = None
    child: Child | None = None
    try:
        child = spawn(
            argv, env=env, cwd=cwd, stdin=stdin, separate_stdout=separate_stdout, privileged=privileged
        )
        proc = child.proc
        assert proc.stdout is not None
        data: list[bytes] = []
        reader: threading.Thread | None = None
        if separate_stdout:
            assert proc.stderr is not None
            pump = Pump(proc.stderr, log_file, on_line, tail)
        else:
            pump = Pump(proc.stdout, log_file, on_line, tail)
        # From here to the wait, an interrupt (Ctrl-C, or SIGTERM turned into one) may land
        # between any two steps, starting the watcher and the pumps among them: every step is
        # inside the block that ends the group, so none leaves the child behind.
        try:
            watch = _GroupWatch(proc.pid, redact_argv(argv, env), child.held)  # in processes.jsonl
            if separate_stdout:
                stdout = proc.stdout
                reader = threading.Thread(target=read_bounded, args=(stdout, data), daemon=True)
                reader.start()
            pump.start()
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            child.end()
        except BaseException as exc:
            child.end()
            if log_file:
                # The log says how it ended, also when it did not end on its own.
                log_file.write(f"# stopped: {type(exc).__name__} after {time.monotonic() - start:.3f} s\n")
            raise
        finally:
            # Grandchildren may still hold the pipe open after the leader exits; a process that
            # left the group (its own session) is still in the cgroup or carries the mark.
            if child.left_behind():
                child.end(grace_s=1.0)
            child.close()
            if pump.is_alive():
                pump.join(timeout=5)
            if reader is not None:
                reader.join(timeout=5)
        duration = time.monotonic() - start
        result = Completed(
            argv=tuple(argv),
            returncode=proc.returncode,
            duration_s=duration,
            started_at=started_at,
            log=log,
            timed_out=timed_out,
            output_tail=tuple(pump.tail),
            stdout=b"".join(data).decode("utf-8", errors="replace") if separate_stdout else None,
            timeout_s=timeout_s,
        )
        raise_unwritten(pump, log)
        if log_file:
            with suppress(OSError):
                log_file.write(f"# {result.describe()} after {duration:.3f} s\n")
        return result
    finally:
        if child is not None:
            proctree.forget(child.pid)
        if watch is not None:
            watch.release()
        if log_file:
            with suppress(OSError):  # a full disk was said above; closing must not hide it
                log_file.close()


def capture(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 60.0,
    log: Path | None = None,
    privileged: bool = False,
) -> tuple[int, str]:
    """Run a query (a version, a git rev, a store path list); return (exit code, stdout).

    Stdout is returned without stderr (warnings must not corrupt data). On failure the text is
    stderr's tail instead. A missing tool is exit code 127 with the reason, never raised:
    queries feed provenance and `doctor`, where "not installed" is an answer.
    """
    try:
        done = run(
            argv,
            log=log,
            env=env if env is not None else dict(os.environ),
            cwd=cwd,
            timeout_s=timeout_s,
            tail=20,
            separate_stdout=True,
            privileged=privileged,
        )
    except ToolMissing as exc:
        return 127, exc.message
    code = 124 if done.timed_out else done.returncode
    if code != 0:
        return code, "\n".join(done.output_tail)
    return code, (done.stdout or "").strip()


def host_capture(argv: Sequence[str], timeout_s: float = 10.0) -> tuple[int, str]:
    """One of qualify's own queries of the host (a program found on qualify's PATH, never the
    plan's), run beside the run's containment rather than in it, as the sandbox's and cgroups'
    probes are: a command in the containment has a PID namespace of its own, where a query such
    as nvidia-smi's list of compute processes names none of the host's. (exit code, stdout);
    127 where the program cannot start, 124 past `timeout_s`."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except OSError:
        return 127, ""
    except subprocess.TimeoutExpired:
        return 124, ""
    return done.returncode, done.stdout


class ServerExited(QualifyError):
    """A server exited before it was ready (e.g. it could not bind its port)."""


@dataclass
class Server:
    """A running long-lived child (an inference server)."""

    argv: tuple[str, ...]
    process: subprocess.Popen[bytes]
    log: Path
    pump: Pump

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self) -> tuple[str, ...]:
        """The last lines of its output. Of a server that has exited, with its last words: they
        may still be in the pipe when the exit is seen, so the copying thread is given up to a
        second to read them (a child of its own holding the pipe open costs that second)."""
        if not self.alive() and self.pump.is_alive():
            self.pump.join(timeout=1.0)
        return tuple(self.pump.tail)

    def recorded_argv(self) -> list[str]:
        return recorded_argv(self.argv)


@contextmanager
def launched(
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str],
    cwd: Path | None = None,
    echo: LineCallback | None = None,
    on_line: Sequence[LineCallback] = (),
    tail: int = 40,
    grace_s: float = KILL_GRACE_S,
    ended: str = "# ended",
) -> Iterator[tuple[subprocess.Popen[bytes], Pump]]:
    """A child left running while the caller works with it (a server, a writer into a pipe): in
    its own watched process group, its output pumped into `log`; when the block leaves, however
    it leaves, the group is ended (TERM, then KILL after `grace_s`) and the log says how."""
    remember_named(env)
    shown = command_line(argv, env)
    if echo:
        echo(f"$ {shown} &")
    log_file = open_log(log)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    log_file.write(f"$ {shown} &\n# cwd: {cwd or Path.cwd()}\n# started: {started_at}\n")
    log_file.write(f"# env: {redact_env(env)}\n")
    log_file.flush()
    try:
        child = spawn(argv, env=env, cwd=cwd, stdin=None)
    except BaseException:
        log_file.close()
        raise
    proc = child.proc
    assert proc.stdout is not None
    pump = Pump(proc.stdout, log_file, on_line, tail)
    watch: _GroupWatch | None = None
    try:
        # Inside the block that ends the group: an interrupt while the watcher or the pump
        # starts must not leave the child behind either.
        watch = _GroupWatch(proc.pid, redact_argv(argv, env), child.held)  # in processes.jsonl
        pump.start()
        yield proc, pump
    finally:
        if child.left_behind() or proc.poll() is None:
            child.end(grace_s=grace_s)
        proc.wait()
        child.close()
        if watch is not None:
            watch.release()
        if pump.is_alive():
            pump.join(timeout=5)
        with suppress(OSError):
            log_file.write(f"{ended}: {proc.returncode}\n")
            log_file.close()


@contextmanager
def serve(
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str],
    ready: Callable[[], bool],
    ready_timeout_s: float,
    cwd: Path | None = None,
    echo: LineCallback | None = None,
    poll_s: float = 0.25,
) -> Iterator[Server]:
    """Start a server in its own process group, wait until `ready()`, and always tear it down.

    Raises QualifyError with the log tail if the server exits or is not ready in time.
    """
    with launched(argv, log=log, env=env, cwd=cwd, echo=echo, tail=60, ended="# server stopped") as (
        proc,
        pump,
    ):
        server = Server(tuple(argv), proc, log, pump)
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if not server.alive():
                raise ServerExited(
                    f"server exited with {proc.returncode} before it was ready; log {log}",
                    "\n".join(server.tail()[-15:]) or None,
                )
            if ready():
                break
            if time.monotonic() > deadline:
                raise QualifyError(
                    f"server not ready after {ready_timeout_s:.0f} s; log {log}",
                    "\n".join(server.tail()[-15:]) or None,
                )
            time.sleep(poll_s)
        yield server
