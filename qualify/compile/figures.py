"""One kernel's figures in one build as the comparison's rules read them (`qualify.compile.diff`):
a frozen record per family, built once from the kernel's aggregated row (its worst copy per
figure, over the columns of its family's table, `qualify.compile.scan`), so that a rule reads
attributes and a figure a table lacks fails where the record is built.

The columns that name a set over the kernel's copies (its target, its descriptor problems, its
stack qualifiers) hold the members joined by ", " (None: no copy had one).

Occupancy is computed here from a row of a family's table, for both builds alike (never taken
from a compiler): `amd_waves`, `cuda_warps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self

from qualify.compile.occupancy import amd_occupancy, cuda_occupancy


@dataclass(frozen=True)
class _Figures:
    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Self:
        """The record of an aggregated row, which holds every field of it."""
        return cls(**{f.name: row[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class GpuFigures(_Figures):
    """What every GPU kernel has: where it runs, and how many of it fit (None: not modelled)."""

    target: str | None
    occupancy: int | None = None
    occupancy_limiter: str | None = None


@dataclass(frozen=True)
class AmdFigures(GpuFigures):
    """An AMDGPU kernel's figures, in its metadata's names."""

    wavefront_size: str | None = None
    wavefront_sizes: list[int] = field(default_factory=list)  # over its copies, sorted
    vgpr_count: int | None = None
    agpr_count: int | None = None
    sgpr_count: int | None = None
    vgpr_spill_count: int = 0
    sgpr_spill_count: int = 0
    private_segment_fixed_size: int | None = None
    group_segment_fixed_size: int = 0
    uses_dynamic_stack: bool | None = None
    descriptor_problems: str | None = None


@dataclass(frozen=True)
class CudaFigures(GpuFigures):
    """A CUDA kernel's figures, as cuobjdump's resource usage and ptxas's log name them."""

    registers: int | None = None
    shared: int | None = None
    stack: int | None = None
    local: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None


@dataclass(frozen=True)
class HostFigures(_Figures):
    """A host function's size and stack frame (`-fstack-usage`; None where none was read)."""

    code_size: int | None
    stack_bytes: int | None
    stack_qualifiers: str | None


def amd_waves(row: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """An AMDGPU kernel's waves per SIMD and what limits them, from a row of its table (None,
    None: not modelled for its processor)."""
    try:
        occupancy = amd_occupancy(
            processor=row["processor"],
            wavefront_size=row["wavefront_size"],
            vgpr_count=max(row["vgpr_count"], row["allocated_vgprs"] or 0),
            sgpr_count=row["sgpr_count"],
            lds_bytes=row["group_segment_fixed_size"],
            max_flat_workgroup_size=row["max_flat_workgroup_size"],
            wgp_mode=row["workgroup_processor_mode"],
        )
    except ValueError:
        return None, None
    return occupancy.waves, occupancy.limiter


def cuda_warps(row: Mapping[str, Any], default_block: int) -> tuple[int | None, str | None]:
    """A CUDA kernel's warps per SM and what limits them, at the block size it declares (else
    `default_block`); None, None: not modelled for its target."""
    block = _declared_block(row) or default_block
    try:
        sm = int(str(row["target"]).removeprefix("sm_").rstrip("af"))
        occupancy = cuda_occupancy(sm, row["registers"], row["shared"] or 0, block)
    except ValueError:
        return None, None
    return occupancy.waves, occupancy.limiter


def _declared_block(row: Mapping[str, Any]) -> int | None:
    """Threads per block the kernel declares ("x,y,z": reqntid, else max threads), or None."""
    for column in ("reqntid", "max_threads"):
        if row.get(column):
            total = 1
            for part in str(row[column]).split(","):
                total *= int(part)
            return total
    return None
