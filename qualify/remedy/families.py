"""The kernel families a remedy rebuilds, and which one a run's compile check holds.

A remedy compiles source files again and reads their kernels as the compile stage read the
candidate's: AMDGPU code objects, or CUDA cubins (with their `ptxas -v` reports, where the check
read spill bytes from the build's). The family is the one whose kernels the check scanned in the
candidate, never a default: a CUDA run remedied as AMDGPU would find no kernel to compare.

What differs between the families is what the comparison matches kernels by
(`qualify.compile.matching`): an AMDGPU kernel by its chip (`processor`) and name, a CUDA kernel
by its `sm_` target and its name with nvcc's translation-unit hashes folded, since a file
compiled alone is another translation unit than the library's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualify.compile.cudanames import match_key
from qualify.compile.mixsetup import DISASSEMBLERS, Disassembler
from qualify.core.errors import UsageError


@dataclass(frozen=True)
class Family:
    """One family a remedy rebuilds: its table's name, how a report says it, and the column
    that names the chip a kernel was built for."""

    name: str
    label: str
    chip: str

    @property
    def disassembler(self) -> Disassembler:
        return DISASSEMBLERS[self.name]

    def kernels(self, table: pd.DataFrame) -> list[tuple[str, str]]:
        """Each row's kernel as the comparison matches it: (chip, key)."""
        keys = table["key"].astype(str)
        if self.name == "cuda":
            keys = keys.map(match_key)
        return list(zip(table[self.chip].astype(str), keys, strict=True))


AMDGPU = Family("amdgpu", "AMDGPU", "processor")
CUDA = Family("cuda", "CUDA", "target")
FAMILIES = {f.name: f for f in (AMDGPU, CUDA)}


def scanned_family(folder: Path, candidate: dict[str, pd.DataFrame]) -> Family:
    """The family whose kernels the check in `folder` scanned in the candidate."""
    held = [name for name, table in candidate.items() if not table.empty]
    gpu = [FAMILIES[name] for name in held if name in FAMILIES]
    check = f"{folder.parent.name}/{folder.name}"
    if len(gpu) == 1:
        return gpu[0]
    if not gpu:
        found = ", ".join(held) or "none"
        raise UsageError(
            f"{check}: the candidate's kernels are of no family a remedy rebuilds (scanned: {found})",
            "qualify remedy rebuilds GPU source files: remedy a compile check that reads AMDGPU code "
            'objects or CUDA cubins (`require = ["amdgpu"]` or `["cuda"]`)',
        )
    raise UsageError(
        f"{check}: the candidate holds both {' and '.join(f.label for f in gpu)} kernels, and a remedy "
        "rebuilds one family",
        "give each family a compile check of its own (`paths` to the files of each), and remedy it "
        "with --check STAGE/CHECK",
    )
