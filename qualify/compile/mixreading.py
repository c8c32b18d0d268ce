"""The instruction mix of one build's GPU kernels, read while `qualify.compile.scan` reads them.

Contract: `MixReading(amdgpu=tool, cuda=tool)` takes the disassembler of each family (None:
that family's mix is not read, and `status` says why). The scan hands it every code object
it finds (`amdgpu`, `cuda`: its origin and bytes); each is disassembled in the background,
once. `attach(family, rows)` waits for that family's disassembly and adds the mix columns to
each kernel row whose code object and function it names; a kernel its code object's
disassembly did not show keeps empty columns, never zeros. `status()` is what the measurement
keeps: per family, the tool, its version, code objects and kernels read (and failed), and
seconds spent. A tool the plan named (`strict`) that fails on a code object makes that code
object unreadable, which the judge reports as an ERROR; a tool found on PATH by `auto` that does
not know a target only leaves those kernels without a mix, and the status says so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from qualify.compile.amdgpumix import function_sizes, parse_objdump
from qualify.compile.disassembly import Disassembly, Parsed, Tool
from qualify.compile.instmix import MIX_COLUMNS

#: llvm-objdump's options for the mix: the instructions, without bytes or leading addresses.
OBJDUMP_OPTIONS = ("-d", "--no-show-raw-insn", "--no-leading-addr")


def _parse_amdgpu(text: str, data: bytes) -> Parsed:
    return parse_objdump(text, function_sizes(data))


def _parse_cuda(text: str, data: bytes) -> Parsed:
    from qualify.compile.sassmix import parse_sass  # the CUDA reader is loaded only for cubins

    return parse_sass(text, data)


class MixReading:
    """See the module docstring."""

    def __init__(
        self,
        amdgpu: Tool | None = None,
        cuda: Tool | None = None,
        not_read: dict[str, str] | None = None,
        folder: Path | None = None,
        strict: frozenset[str] = frozenset(),
    ) -> None:
        self._started = time.monotonic()
        self._strict = strict
        #: Code objects a tool named in `strict` failed on, as the scan lists unreadable files.
        self.unreadable: list[dict[str, str]] = []
        self._not_read = dict(not_read or {})
        self._jobs: dict[str, Disassembly[str]] = {}
        if amdgpu is not None:
            self._jobs["amdgpu"] = Disassembly(amdgpu, _parse_amdgpu, folder=folder)
        if cuda is not None:
            self._jobs["cuda"] = Disassembly(cuda, _parse_cuda, folder=folder)
        self._status: dict[str, dict[str, Any]] = {}

    def amdgpu(self, origin: str, data: bytes) -> None:
        if "amdgpu" in self._jobs:
            self._jobs["amdgpu"].submit(origin, data, origin)

    def cuda(self, origin: str, data: bytes) -> None:
        if "cuda" in self._jobs:
            self._jobs["cuda"].submit(origin, data, origin)

    def attach(self, family: str, rows: list[dict[str, Any]]) -> None:
        """Add the mix columns to `rows` (in place) once `family`'s disassembly is done."""
        for row in rows:
            row.update(dict.fromkeys(MIX_COLUMNS))
        job = self._jobs.get(family)
        if job is None:
            return
        parsed, failed = job.results()
        for origin, message in failed.items() if family in self._strict else ():
            self.unreadable.append(
                {"file": origin, "reader": f"{family} instruction mix", "message": message}
            )
        shown = 0
        for row in rows:
            mix = parsed.get(row["origin"], {}).get(row["name"])
            if mix is not None:
                row.update(mix)
                shown += 1
        self._status[family] = {
            "tool": list(job.tool.argv),
            "version": job.tool.version,
            "code_objects": len(parsed),
            "code_objects_failed": len(failed),
            "failed": list(failed.values())[:5],
            "kernels": len(rows),
            "kernels_read": shown,
            "seconds": round(time.monotonic() - self._started, 3),
        }

    def status(self) -> dict[str, dict[str, Any]]:
        """Per family: how its mix was read, or why it was not."""
        out = {family: {"not_read": why} for family, why in self._not_read.items()}
        out.update(self._status)
        return out

    def close(self) -> None:
        for job in self._jobs.values():
            job.close()
