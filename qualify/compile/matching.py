"""Which kernels of two builds are one kernel, and the figures it is compared by.

GPU kernels are matched by (target processor or sm, name with `.kd` and `.intern.<hash>`
stripped; CUDA names with nvcc's translation-unit hashes and CCCL's versioned namespaces folded,
`qualify.compile.cudanames`), host kernels by their folded name. A build for an AMDGPU generic
target is compared, kernel by kernel, for each chip of it the other build has (`concretize`). A
kernel present several times on one side (template instances in several translation units, a
kernel linked into two libraries) is compared by its worst copy per figure, and its copy count
is kept (`aggregate`), with the source files its copies were compiled from. Occupancy comes
from `qualify.compile.occupancy` for both sides alike, never from a compiler.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from qualify.compile.cudanames import match_key
from qualify.compile.figures import amd_waves, cuda_warps
from qualify.compile.instmix import TRAPS

# The processors each code object V6 generic target runs on (llvm.org AMDGPUUsage, "Generic
# Processor Versioning"): a generic build is compared against each of these the other has.
GENERIC_MEMBERS: dict[str, frozenset[str]] = {
    "gfx9-generic": frozenset({"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}),
    "gfx9-4-generic": frozenset({"gfx940", "gfx941", "gfx942", "gfx950"}),
    "gfx10-1-generic": frozenset({"gfx1010", "gfx1011", "gfx1012", "gfx1013"}),
    "gfx10-3-generic": frozenset(f"gfx103{n}" for n in range(7)),
    "gfx11-generic": frozenset(
        {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}
    ),
    "gfx12-generic": frozenset({"gfx1200", "gfx1201"}),
}


def concretize(table: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """`table` with each generic-target kernel restated for every chip its generic target
    covers on which `other` has that kernel and `table` has not, so the two builds' kernels
    match and occupancy is computed for the real chip. `target` keeps the generic target id.
    A generic kernel matched to no chip stays as it is."""
    if table.empty or other.empty:
        return table
    own = set(zip(table["processor"], table["key"], strict=True))
    theirs = set(zip(other["processor"], other["key"], strict=True))
    their_processors = {processor for processor, _ in theirs}
    parts: list[pd.DataFrame] = []
    restated = pd.Series(False, index=table.index)
    for generic, members in GENERIC_MEMBERS.items():
        if generic in their_processors:
            continue  # both builds have the generic target: compare it as it is
        rows = table[table["processor"] == generic]
        for chip in sorted(members & their_processors):
            wanted = pd.Series(
                [(chip, key) in theirs and (chip, key) not in own for key in rows["key"]],
                index=rows.index,
                dtype=bool,
            )
            if wanted.any():
                parts.append(rows[wanted].assign(processor=chip))
                restated |= table.index.isin(rows[wanted].index)
    if not parts:
        return table
    return pd.concat([table[~restated], *parts], ignore_index=True)


def aggregate(
    family: str, table: pd.DataFrame, cuda_block_size: int
) -> dict[tuple[str, str], dict[str, Any]]:
    """(target, key) -> the worst figure of each field over that kernel's copies, with occupancy
    (a CUDA kernel that declares no block size at `cuda_block_size` threads)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in _records(table):
        if family == "host":
            target = ""
        elif family == "amdgpu":
            target = row["processor"]
            row["occupancy"], row["occupancy_limiter"] = amd_waves(row)
        else:
            target = row["target"]
            row["occupancy"], row["occupancy_limiter"] = cuda_warps(row, cuda_block_size)
            row["key"] = match_key(row["key"])
        groups.setdefault((target, row["key"]), []).append(row)
    return {key: _worst(family, rows) for key, rows in groups.items()}


def _records(table: pd.DataFrame) -> Iterable[dict[str, Any]]:
    for row in table.to_dict("records"):
        # Parquet's nullable columns come back as pd.NA; the rules below read None.
        yield {
            str(k): (None if v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v)
            for k, v in row.items()
        }


_LOWEST = ("occupancy",)
#: Counted in every copy or not at all: a kernel's traps are its copy's with the fewest.
_FEWEST = (TRAPS,)
_ANY = ("uses_dynamic_stack",)
_SET = ("wavefront_size", "target", "file", "descriptor_problems", "stack_qualifiers", "source_file")


def _worst(family: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"copies": len(rows)}
    for field in rows[0]:
        values = [r[field] for r in rows if r[field] is not None]
        if field in _SET:
            out[field] = ", ".join(sorted({str(v) for v in values})) or None
        elif field in _ANY:
            out[field] = any(values) if values else None
        elif field in _LOWEST:
            out[field] = min(values) if values else None
            # What limits the lowest copy's occupancy (None: not modelled for any copy).
            out["occupancy_limiter"] = (
                next(r["occupancy_limiter"] for r in rows if r[field] == out[field]) if values else None
            )
        elif field in _FEWEST:
            out[field] = min(values) if values else None
        elif field == "occupancy_limiter":
            continue
        elif values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[field] = max(values)
        else:
            out[field] = values[0] if values else None
    if family == "amdgpu":
        out["wavefront_sizes"] = sorted({r["wavefront_size"] for r in rows})
    if family != "host":
        # As a list too: `source_file` joins the names with ", ", which a name may hold.
        out["source_files"] = sorted(
            {str(r["source_file"]) for r in rows if r.get("source_file") is not None}
        )
    return out
