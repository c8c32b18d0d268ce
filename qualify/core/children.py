"""Starting a child of qualify: found before it is wrapped, held by the run's containment, its
log opened without following a link, and ended with everything it started."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from qualify.core import containment, proctree
from qualify.core.containment import Wrapped
from qualify.core.errors import QualifyError, RunStoreError, ToolMissing
from qualify.core.groups import KILL_GRACE_S, group_alive
from qualify.core.outputpump import Pump
from qualify.core.runfolder import open_append_nofollow


@dataclass
class Child:
    """A started child and what holds it (its cgroup, or its mark in the process tree)."""

    proc: subprocess.Popen[bytes]
    held: Wrapped

    @property
    def pid(self) -> int:
        return self.proc.pid

    def left_behind(self) -> bool:
        """Whether anything of the child's is still alive after its leader ended."""
        return group_alive(self.proc.pid) or (self.held.cell is not None and self.held.cell.populated())

    def end(self, grace_s: float = KILL_GRACE_S) -> None:
        kill_group(self.proc, grace_s, self.held)

    def close(self) -> None:
        """The child is done: nothing of it may remain, and its cgroup goes."""
        if self.held.cell is not None:
            self.held.cell.kill()
        elif self.held.mark is not None:
            proctree.end_command(self.proc.pid, self.held.mark, grace_s=1.0)
        proctree.forget(self.proc.pid)


def _found(argv0: str, env: Mapping[str, str], cwd: Path | None) -> None:
    """Raise ToolMissing when `argv0` cannot be run, before a containment's wrapper hides it."""
    if "/" in argv0:
        given = Path(argv0)
        path = given if given.is_absolute() else (cwd or Path.cwd()) / argv0
        if not path.is_file():
            where = argv0 if given.is_absolute() or cwd is None else str(cwd)
            raise ToolMissing(f"cannot run {where!r}: not found")
        if not os.access(path, os.X_OK):
            raise ToolMissing(f"cannot run {argv0!r}: permission denied")
        return
    if shutil.which(argv0, path=env.get("PATH", os.defpath)) is None:
        raise ToolMissing(
            f"cannot run {argv0!r}: not found",
            "install it or put it on PATH (qualify passes only allowlisted variables, see `inherit_env`)",
        )


#: The thread children are started from when a worker thread asks (a block's servers start side by
#: side). bubblewrap's --die-with-parent kills the command when the *thread* that started it ends,
#: not the process: a server started from a pool's thread died as that thread finished. This
#: thread lives as long as qualify, as the main thread does; qualify's watchers and cgroups still
#: end every child with qualify.
_STARTER = ThreadPoolExecutor(1, thread_name_prefix="qualify-starter")


def _started(start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """`start()`, called from a thread that outlives the child (see `_STARTER`)."""
    if threading.current_thread() is threading.main_thread():
        return start()
    return _STARTER.submit(start).result()


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    stdin: int | IO[bytes] | None,
    separate_stdout: bool = False,
    privileged: bool = False,
) -> Child:
    if not argv:
        raise QualifyError("empty command line", "the check's `run` template produced nothing")
    held = containment.wrap(argv, env, privileged=privileged)
    if len(held.argv) != len(argv):  # behind a wrapper, a missing program would be its exit 127
        _found(argv[0], env, cwd)
    try:
        proc = _started(
            lambda: subprocess.Popen(
                [_utf8(arg) for arg in held.argv],
                env={_utf8(name): _utf8(value) for name, value in held.env.items()},
                cwd=None if cwd is None else _utf8(str(cwd)),
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if separate_stdout else subprocess.STDOUT,
                start_new_session=True,  # own session and process group
            )
        )
    except FileNotFoundError:
        if held.cell is not None:
            held.cell.remove()
        missing = argv[0] if cwd is None or not (cwd / argv[0]).exists() else str(cwd)
        raise ToolMissing(
            f"cannot run {missing!r}: not found",
            "install it or put it on PATH (qualify passes only allowlisted variables, see `inherit_env`)",
        ) from None
    except PermissionError:
        if held.cell is not None:
            held.cell.remove()
        raise ToolMissing(f"cannot run {argv[0]!r}: permission denied") from None
    proctree.adopt(proc.pid)
    return Child(proc, held)


def _utf8(text: str) -> bytes:
    """An argument, variable or folder as the command gets it: in UTF-8, as the plan and the
    project's files are written, whatever this process's locale (Python would encode with the
    C locale's ASCII and fail on `→`); a name read from the file system or the command line
    (undecodable bytes held as surrogates) gets its own bytes back."""
    return text.encode("utf-8", "surrogateescape")


def kill_group(
    proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S, held: Wrapped | None = None
) -> None:
    """SIGTERM the child's process group (and everything in its cgroup), then SIGKILL what is
    left after `grace_s`."""
    pgid = proc.pid  # start_new_session makes the child its own group leader
    cell = held.cell if held is not None else None
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    if cell is not None:
        cell.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_alive(pgid) and (cell is None or not cell.populated()):
            return
        time.sleep(0.05)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if cell is not None:
        with suppress(OSError):
            (cell.path / "cgroup.kill").write_text("1")
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)


def open_log(log: Path) -> IO[str]:
    """The log, opened to append without following a link (nor, inside a run folder being
    written, a folder on the way): one a command planted there is refused, never written
    through."""
    return open_append_nofollow(log)


def raise_unwritten(pump: Pump, log: Path | None) -> None:
    if pump.write_error is not None and log is not None:
        exc = pump.write_error
        raise RunStoreError(
            f"{log.parent}: cannot write the log {log.name}: {exc.strerror or exc}",
            "free space on that disk (or point the runs directory elsewhere) and resume the run",
        )
