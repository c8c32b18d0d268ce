"""Occupancy from a kernel's resource figures: one table-driven model per vendor.

Contract. `amd_occupancy` and `cuda_occupancy` turn the figures a code object or cubin records
(registers, LDS / shared memory, workgroup size) into the number of waves (AMD, per SIMD) or
warps (NVIDIA, per SM) that can be resident at once, and name the resource that binds. Both
arms of a comparison go through the same function, so a change in a compiler's own hardware
model can never show up as a change of occupancy: compilers' printed figures are never read.
The result is an estimate for a launch at the kernel's maximum workgroup size with no dynamic
LDS / shared memory; it ignores scratch, wave-slot sharing with other kernels and, for CUDA,
cache carve-out preferences other than the default.

AMD (waves per SIMD), following LLVM's `AMDGPUBaseInfo.cpp` (IsaInfo: getMaxWavesPerEU,
getTotalNumVGPRs, getVGPRAllocGranule, getNumWavesPerEUWithNumVGPRs, getEUsPerCU,
getMaxWorkGroupsPerCU), `GCNSubtarget::getOccupancyWithNumSGPRs` and
`AMDGPUSubtarget::getOccupancyWithLocalMemSize`; checked against clang-19's
`Occupancy [waves/SIMD]` remark in tests/compile/test_occupancy.py:

- VGPRs: min(max waves, total / alignTo(vgprs, granule)), at least 1, where vgprs is what the
  hardware allocates: the larger of the metadata `.vgpr_count` and the kernel descriptor's
  granulated VGPR count. They differ when `amdgpu_waves_per_eu` caps the waves: clang then
  pads the descriptor (a 2-VGPR kernel with waves_per_eu(1,1) on gfx900 is given 132) and
  leaves `.vgpr_count` at what the code uses. On gfx90a/gfx94x both already include the
  unified AGPRs; on gfx908 `.vgpr_count` is max(VGPR, AGPR). `amd_kernel_occupancy` does this.
- SGPRs bind only before GFX10 (<=80: 10, <=88: 9, <=100: 8, else 7).
- LDS: workgroups per CU (WGP) = LDS size // lds_bytes; waves = ceil(groups x waves per group
  / SIMDs). GFX10+ in WGP mode (the default) has 128 KiB over 4 SIMDs, in CU mode 64 KiB over 2.
- Workgroup slots: a CU holds at most max waves x SIMDs waves in whole workgroups, and at most
  16 multi-wave workgroups (32 in WGP mode), so a 1024-lane wave64 workgroup caps gfx9 at 8.
- gfx12 (gfx1200, gfx1201, gfx12-generic): LLVM 19 gives them the 1.5x VGPR file of gfx1100
  (1536 / 768, granule 24 / 12); clang-19's remarks agree (tests), no hardware was measured.
- Generic targets take the most conservative member: gfx9-generic = gfx900 (256 VGPRs,
  granule 4), gfx9-4-generic = gfx940 (64 KiB LDS, where gfx950 has 160 KiB),
  gfx10-1-generic = gfx101x, gfx10-3-generic = gfx103x, gfx11-generic = gfx1102 (1024 / 512
  VGPRs, granule 16 / 8, not the 1.5x file of gfx1100). This is also what LLVM models.
- gfx950 and gfx9-4-generic postdate LLVM 19; gfx950's 160 KiB LDS is LLVM's
  FeatureAddressableLocalMemorySize163840. gfx950, gfx942 and gfx1151 are checked against
  clang 21's and 22's remarks on real ggml kernels (tests/compile/test_rocm_ggml.py). Those
  compilers report the best occupancy over the workgroup sizes a kernel allows (one wave up to
  its maximum); this model keeps the maximum, the size the kernel declares and is launched
  with, so the two differ where whole workgroups bind (a 192-lane wave32 group: 15, not 16).

NVIDIA (warps per SM), following the logic of the CUDA toolkit's `cuda_occupancy.h`
(`cudaOccMaxActiveBlocksPerMultiprocessor`): registers are allocated per warp in units of 256
over 4 sub-partitions of 16 K registers each; shared memory per block is the kernel's plus the
driver's reserve (1 KiB from sm_80 on), rounded up to 128 bytes (256 before sm_80); the kernel
is assumed to have opted in to the large per-block shared memory limit, as the runtime's
conversion of cudaFuncAttributes does; blocks per SM are capped by the header's per-arch table.
Per-SM properties (warps, shared memory, blocks) come from NVIDIA CCCL
`libcudacxx/include/cuda/__device/arch_traits.h` and the CUDA C++ Programming Guide table
"Technical Specifications per Compute Capability"; registers per SM and per block are 64 K
everywhere. Barrier and virtual-resource limits (sm_90+) never bind with one barrier and are
not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from qualify.compile.amdgpu import AmdKernel

__all__ = [
    "AMD_PROCESSORS",
    "CUDA_ARCHES",
    "Occupancy",
    "amd_kernel_occupancy",
    "amd_occupancy",
    "cuda_occupancy",
]


@dataclass(frozen=True)
class Occupancy:
    """Resident waves of one kernel, and what keeps it from more.

    `waves` is per SIMD for AMD and warps per SM for NVIDIA (`unit` says which); `max_waves`
    is the hardware's ceiling in the same unit, so `waves / max_waves` is the usual
    "occupancy" ratio. `waves` is 0 when the kernel cannot be launched at all (e.g. shared
    memory above the per-block limit). `limiter` is "max" when nothing keeps the kernel
    below the ceiling; otherwise the first binding resource, in the order:

    - AMD: "vgpr", "sgpr", "lds", "workgroup" (whole workgroups in the wave slots/barriers);
    - NVIDIA: "registers", "shared", "threads" (whole blocks in the warp slots), "blocks".
    """

    waves: int
    limiter: str
    max_waves: int
    unit: str


@dataclass(frozen=True)
class _AmdTable:
    max_waves: int  # per SIMD (IsaInfo::getMaxWavesPerEU)
    vgpr_file: dict[int, tuple[int, int]]  # wave size -> (VGPRs per SIMD, allocation granule)
    lds: int  # bytes per CU (doubled per WGP in WGP mode on GFX10+)
    gfx10_plus: bool  # WGP mode exists, SGPRs no longer bind


# VGPR files are counted in registers of one lane: a wave64 allocation takes twice the space.
_GFX9 = _AmdTable(10, {64: (256, 4)}, 64 * 1024, gfx10_plus=False)
_GFX90A = _AmdTable(8, {64: (512, 8)}, 64 * 1024, gfx10_plus=False)  # VGPR+AGPR unified
_GFX950 = _AmdTable(8, {64: (512, 8)}, 160 * 1024, gfx10_plus=False)
_GFX101X = _AmdTable(20, {32: (1024, 8), 64: (512, 4)}, 64 * 1024, gfx10_plus=True)
_GFX103X = _AmdTable(16, {32: (1024, 16), 64: (512, 8)}, 64 * 1024, gfx10_plus=True)
# Feature1_5xVGPRs (formerly GFX11FullVGPRs): 1.5x the file, allocated in granules of 24 / 12.
_GFX11_FULL = _AmdTable(16, {32: (1536, 24), 64: (768, 12)}, 64 * 1024, gfx10_plus=True)

_AMD: dict[str, _AmdTable] = {
    **dict.fromkeys(("gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90c"), _GFX9),
    "gfx9-generic": _GFX9,
    **dict.fromkeys(("gfx90a", "gfx940", "gfx941", "gfx942", "gfx9-4-generic"), _GFX90A),
    "gfx950": _GFX950,
    **dict.fromkeys(("gfx1010", "gfx1011", "gfx1012", "gfx1013", "gfx10-1-generic"), _GFX101X),
    **dict.fromkeys([f"gfx103{n}" for n in range(7)] + ["gfx10-3-generic"], _GFX103X),
    **dict.fromkeys(("gfx1102", "gfx1103", "gfx1150", "gfx1152", "gfx11-generic"), _GFX103X),
    **dict.fromkeys(("gfx1100", "gfx1101", "gfx1151"), _GFX11_FULL),
    **dict.fromkeys(("gfx1200", "gfx1201", "gfx12-generic"), _GFX11_FULL),
}
AMD_PROCESSORS: tuple[str, ...] = tuple(sorted(_AMD))
# Before GFX10 the SIMD's 800 SGPRs limit waves: (most SGPRs, waves); more than 100 gives 7.
_SGPR_STEPS = ((80, 10), (88, 9), (100, 8))


def amd_occupancy(
    processor: str,
    wavefront_size: int,
    vgpr_count: int,
    sgpr_count: int,
    lds_bytes: int,
    max_flat_workgroup_size: int,
    wgp_mode: bool | None = None,
) -> Occupancy:
    """Waves per SIMD of an AMDGPU kernel, from its code object figures.

    `processor` is the target id's processor (`AmdKernel.processor`, e.g. "gfx90a");
    `vgpr_count` the VGPRs allocated per lane (see the module docstring: with a waves-per-EU
    bound this is the descriptor's figure, not `.vgpr_count`); the others are `.sgpr_count`,
    `.group_segment_fixed_size` and `.max_flat_workgroup_size`. `wgp_mode` is the kernel's
    `.workgroup_processor_mode` on GFX10+; None means the compiler default (WGP mode). Raises
    ValueError for an unknown processor, a wave size the processor lacks, or negative figures.
    """
    table = _AMD.get(processor)
    if table is None:
        raise ValueError(f"unknown AMDGPU processor {processor!r}; known: {', '.join(AMD_PROCESSORS)}")
    if wavefront_size not in table.vgpr_file:
        raise ValueError(f"{processor} has no wave{wavefront_size}")
    if min(vgpr_count, sgpr_count, lds_bytes) < 0 or max_flat_workgroup_size < 1:
        raise ValueError(
            f"resource figures must be >= 0 and the workgroup size >= 1, got vgpr={vgpr_count} "
            f"sgpr={sgpr_count} lds={lds_bytes} workgroup={max_flat_workgroup_size}"
        )
    if wgp_mode and not table.gfx10_plus:
        raise ValueError(f"{processor} has no WGP mode (GFX10 and later only)")
    total, granule = table.vgpr_file[wavefront_size]
    wgp = table.gfx10_plus and wgp_mode is not False
    simds = 2 if table.gfx10_plus and not wgp else 4  # SIMDs sharing a workgroup's CU (or WGP)
    lds_total = table.lds * 2 if wgp else table.lds
    waves_per_group = -(-max_flat_workgroup_size // wavefront_size)

    limits: list[tuple[str, int]] = []
    if vgpr_count:
        allocated = -(-vgpr_count // granule) * granule
        limits.append(("vgpr", max(1, total // allocated)))
    if sgpr_count and not table.gfx10_plus:
        limits.append(("sgpr", next((w for bound, w in _SGPR_STEPS if sgpr_count <= bound), 7)))
    if lds_bytes:
        # A workgroup needing more LDS than exists still gets one wave (LLVM assumes the worst).
        groups = lds_total // lds_bytes
        limits.append(("lds", -(-groups * waves_per_group // simds) if groups else 1))
    # Whole workgroups in the CU's wave slots; multi-wave groups also need one of 16 barriers
    # (32 per WGP). Single-wave groups use no barrier.
    slots = table.max_waves * simds
    groups = slots if waves_per_group == 1 else min(slots // waves_per_group, 32 if wgp else 16)
    limits.append(("workgroup", -(-groups * waves_per_group // simds)))
    return _occupancy(limits, table.max_waves, "waves/SIMD")


def amd_kernel_occupancy(kernel: AmdKernel, wgp_mode: bool | None = None) -> Occupancy:
    """`amd_occupancy` of a kernel read by `qualify.compile.amdgpu`, with the VGPRs it is allocated.

    `wgp_mode` overrides the kernel's `.workgroup_processor_mode`, which only code object V5+
    records; without either, GFX10+ kernels are taken to run in WGP mode, the default.
    """
    allocated = kernel.descriptor_vgpr_granules * kernel.vgpr_granule
    if wgp_mode is None:
        wgp_mode = kernel.workgroup_processor_mode
    return amd_occupancy(
        kernel.processor,
        kernel.wavefront_size,
        max(kernel.vgpr_count, allocated),
        kernel.sgpr_count,
        kernel.group_segment_fixed_size,
        kernel.max_flat_workgroup_size,
        wgp_mode,
    )


@dataclass(frozen=True)
class _CudaTable:
    max_warps: int  # per SM
    max_blocks: int  # per SM (cuda_occupancy.h cudaOccMaxBlocksPerMultiprocessor)
    shared_per_sm: int  # bytes, maximum carve-out
    reserved_per_block: int  # bytes the driver adds to every block (sm_80 on)


_CUDA: dict[int, _CudaTable] = {
    70: _CudaTable(64, 32, 96 * 1024, 0),
    75: _CudaTable(32, 16, 64 * 1024, 0),
    80: _CudaTable(64, 32, 164 * 1024, 1024),
    86: _CudaTable(48, 16, 100 * 1024, 1024),
    87: _CudaTable(48, 16, 164 * 1024, 1024),
    88: _CudaTable(48, 16, 100 * 1024, 1024),
    89: _CudaTable(48, 24, 100 * 1024, 1024),
    90: _CudaTable(64, 32, 228 * 1024, 1024),
    100: _CudaTable(64, 32, 228 * 1024, 1024),
    103: _CudaTable(64, 32, 228 * 1024, 1024),
    110: _CudaTable(48, 24, 228 * 1024, 1024),
    120: _CudaTable(48, 24, 100 * 1024, 1024),
    121: _CudaTable(48, 24, 100 * 1024, 1024),
}
CUDA_ARCHES: tuple[int, ...] = tuple(sorted(_CUDA))
_WARP = 32
_MAX_THREADS_PER_BLOCK = 1024
_REGS_PER_SM = 64 * 1024  # also the per-block limit
_SUB_PARTITIONS = 4
_REG_UNIT = 256  # registers are allocated per warp in units of 256
_MAX_REGS_PER_THREAD = 256  # the header's check; ptxas itself stops at 255


def cuda_occupancy(sm: int, registers: int, shared_bytes: int, threads_per_block: int) -> Occupancy:
    """Warps per SM of a CUDA kernel launched with `threads_per_block` threads.

    `sm` is the compute capability as 10 x major + minor (80 for sm_80); `registers` is the
    cubin's REG figure, `shared_bytes` its static plus any dynamic shared memory per block.
    Raises ValueError for an unknown `sm` or figures below their minimum.
    """
    table = _CUDA.get(sm)
    if table is None:
        raise ValueError(f"unknown CUDA arch sm_{sm}; known: {', '.join(f'sm_{a}' for a in CUDA_ARCHES)}")
    if registers < 0 or shared_bytes < 0 or threads_per_block < 1:
        raise ValueError(
            f"registers and shared memory must be >= 0 and threads >= 1, got registers={registers} "
            f"shared={shared_bytes} threads={threads_per_block}"
        )
    warps = -(-threads_per_block // _WARP)
    regs_per_warp = -(-registers * _WARP // _REG_UNIT) * _REG_UNIT
    # The hardware checks a block's registers as if its warps filled all sub-partitions evenly.
    regs_assumed = regs_per_warp * (-(-warps // _SUB_PARTITIONS) * _SUB_PARTITIONS)
    shared_unit = 128 if sm >= 80 else 256
    shared = -(-(shared_bytes + table.reserved_per_block) // shared_unit) * shared_unit

    limits: list[tuple[str, int]] = []
    if registers > _MAX_REGS_PER_THREAD or regs_assumed > _REGS_PER_SM:
        limits.append(("registers", 0))
    elif regs_per_warp:
        # Registers live in the sub-partitions: whole warps per sub-partition, times four.
        warps_by_registers = _REGS_PER_SM // _SUB_PARTITIONS // regs_per_warp * _SUB_PARTITIONS
        limits.append(("registers", warps_by_registers // warps))
    # The opt-in per-block limit is the SM's shared memory less the reserve; with it the whole
    # carve-out is available, which is the default preference.
    if shared > table.shared_per_sm:
        limits.append(("shared", 0))
    elif shared:
        limits.append(("shared", table.shared_per_sm // shared))
    limits.append(("threads", table.max_warps // warps if threads_per_block <= _MAX_THREADS_PER_BLOCK else 0))
    limits.append(("blocks", table.max_blocks))
    return _occupancy([(name, blocks * warps) for name, blocks in limits], table.max_warps, "warps/SM")


def _occupancy(limits: list[tuple[str, int]], ceiling: int, unit: str) -> Occupancy:
    """The least of `limits` capped at `ceiling`, named by the first limit that reaches it."""
    waves = min([ceiling, *(limit for _, limit in limits)])
    if waves == ceiling:
        return Occupancy(waves, "max", ceiling, unit)
    limiter = next(name for name, limit in limits if min(limit, ceiling) == waves)
    return Occupancy(waves, limiter, ceiling, unit)
