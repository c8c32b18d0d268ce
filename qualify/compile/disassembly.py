"""Running a toolchain's disassembler over the code objects a scan finds, on every core.

Contract: `Disassembly(tool, parse)` takes code objects one by one (`submit`, while the scan
goes on reading the files), writes each to a private temporary folder, runs the tool on it in a
pool of worker threads (one process per code object, as many at once as there are cores) and
parses its output with `parse(text, data)`; `results()` waits for all and returns each
submitted key's parse, and for each code object the tool failed on, a message naming it and
quoting the tool: a kernel's mix is measured or the reading says why not, never left empty.

The folder is the tool's working directory and its `$TMPDIR`, so that a tool that runs in a
sandbox of its own (a wrapper that enters a toolchain root) can be given exactly that folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

from qualify.core import process
from qualify.core.errors import QualifyError, ToolMissing

Key = TypeVar("Key", bound=Hashable)
Parsed = dict[str, dict[str, int]]

_TIMEOUT_S = 600  # one code object; the largest in a whole HIP library takes seconds


class DisassemblyError(QualifyError):
    """The disassembler could not be run, or failed on a code object."""


@dataclass(frozen=True)
class Tool:
    """A disassembler command (argv before the options), the version line it reports, and the
    environment it runs with: the check's, whose allowlist keeps the host's secrets out of a
    tool that may come from the build under test."""

    argv: tuple[str, ...]
    options: tuple[str, ...]
    version: str
    env: Mapping[str, str] = field(default_factory=dict)


def probe(
    argv: Sequence[str], options: Sequence[str], env: Mapping[str, str], version_flag: str = "--version"
) -> Tool:
    """The tool at `argv`, with its version line; DisassemblyError when it does not run."""
    if not argv:
        raise DisassemblyError("no disassembler given")
    code, text = process.capture([*argv, version_flag], env=env, timeout_s=120)
    # LLVM says "LLVM version 22.1.8"; NVIDIA's tools "Cuda compilation tools, release 13.5, V13.5.37".
    lines = [
        line.strip() for line in text.splitlines() if "version" in line.lower() or " release " in line.lower()
    ]
    if code != 0 or not lines:
        raise DisassemblyError(
            f"disassembler {' '.join(argv)} {version_flag} exited {code}: {text.strip()[-300:]}",
            "set the check's `objdump` to the toolchain's llvm-objdump (AMDGPU) or `cuobjdump` to its "
            "cuobjdump (CUDA)",
        )
    return Tool(tuple(argv), tuple(options), lines[0], dict(env))


def first_on_path(names: Sequence[str]) -> list[str] | None:
    """The first of `names` found on PATH, as an argv, or None."""
    for name in names:
        found = shutil.which(name)
        if found:
            return [found]
    return None


class Disassembly(Generic[Key]):
    """Code objects disassembled in the background while the caller goes on (see the module)."""

    def __init__(
        self,
        tool: Tool,
        parse: Callable[[str, bytes], Parsed],
        workers: int | None = None,
        folder: Path | None = None,
    ) -> None:
        self.tool = tool
        self._parse = parse
        self._folder = Path(tempfile.mkdtemp(prefix="disassembly-", dir=folder))
        self._pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 2)
        self._jobs: dict[Key, Future[Parsed]] = {}
        self._count = 0

    def submit(self, key: Key, data: bytes, where: str) -> None:
        """Disassemble one code object (`where` names it in errors); a key seen before is kept."""
        if key in self._jobs:
            return
        self._count += 1
        path = self._folder / f"{self._count}.o"
        path.write_bytes(data)
        self._jobs[key] = self._pool.submit(self._one, path, data, where)

    def _one(self, path: Path, data: bytes, where: str) -> Parsed:
        # The tool's output can be far larger than what a command's stdout may hold in memory:
        # a shell in front of it sends it to a file beside the code object.
        text_path = path.with_suffix(".s")
        argv = ["/bin/sh", "-c", 'out=$1; shift; exec "$@" > "$out"', "sh", text_path.name]
        argv += [*self.tool.argv, *self.tool.options, path.name]
        env = {**self.tool.env, "TMPDIR": str(self._folder)}
        try:
            done = process.run(
                argv, log=None, env=env, cwd=self._folder, timeout_s=_TIMEOUT_S, separate_stdout=True
            )
            if not done.ok:
                said = " ".join(done.output_tail)[-400:]
                raise DisassemblyError(f"{where}: {' '.join(self.tool.argv)} {done.describe()}: {said}")
            text = text_path.read_text(encoding="utf-8", errors="replace")
        except ToolMissing as exc:
            raise DisassemblyError(f"{where}: {exc.message}", exc.hint) from None
        finally:
            path.unlink(missing_ok=True)
            text_path.unlink(missing_ok=True)
        return self._parse(text, data)

    def results(self) -> tuple[dict[Key, Parsed], dict[Key, str]]:
        """(each key's parse, each failed key's message): one code object the tool cannot read
        (a target it does not know) leaves the others read."""
        parsed: dict[Key, Parsed] = {}
        failed: dict[Key, str] = {}
        for key, job in self._jobs.items():
            try:
                parsed[key] = job.result()
            except DisassemblyError as exc:
                failed[key] = exc.message
        return parsed, failed

    def close(self) -> None:
        for job in self._jobs.values():
            job.cancel()
        self._pool.shutdown(wait=True)
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> Disassembly[Key]:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
