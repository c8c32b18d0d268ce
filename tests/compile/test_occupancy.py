"""The occupancy model against the toolchains' own occupancy logic.

AMD: every kernel is compiled here with clang-19, one processor and wave mode per invocation
(remarks do not name the processor). The model reads its inputs from the code object through
`qualify.compile.amdgpu.read_code_object`; the expected side is clang-19's `Occupancy [waves/SIMD]`
remark (-Rpass-analysis=kernel-resource-usage) of the same compilation. The kernels cover a
range of register pressure (K live accumulators, and inline-asm clobbers that pin the VGPR,
AGPR or SGPR count to each side of an allocation granule), waves-per-EU and workgroup-size
attributes, and LDS-heavy kernels. clang-15, when installed, shows that an older compiler's
own figure differs on gfx1100 while the model reads both compilers' objects alike.

NVIDIA: there is no GPU here and no tool prints an occupancy, so the model is compared with
the CUDA toolkit's own `cuda_occupancy.h` (header-only, host code), compiled here and fed the
per-SM properties of NVIDIA CCCL `libcudacxx/include/cuda/__device/arch_traits.h` (this table
stands in for cudaGetDeviceProperties, which needs a device). Two hand-checked figures come
from the CUDA C++ Best Practices Guide, section "Calculating Occupancy".
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cuda_wheels import load_toolchain, wheel_tree

from qualify.compile.amdgpu import AmdKernel, read_code_object
from qualify.compile.occupancy import (
    AMD_PROCESSORS,
    CUDA_ARCHES,
    amd_kernel_occupancy,
    amd_occupancy,
    cuda_occupancy,
)

CLANG19 = shutil.which("clang-19")
needs_clang19 = pytest.mark.skipif(CLANG19 is None, reason="needs clang-19 (apt-get install clang-19)")
needs_clang15 = pytest.mark.skipif(shutil.which("clang-15") is None, reason="clang-15 is not installed")
CL = ["-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa", "-O3", "-nogpulib"]
REMARKS = ["-Rpass-analysis=kernel-resource-usage"]

# --- generated kernels -------------------------------------------------------------------------

GID = "(__builtin_amdgcn_workgroup_id_x() * 256u + __builtin_amdgcn_workitem_id_x())"


def accumulators(k: int) -> str:
    """K values live across a loop: register pressure grows with K, spilling at the top end."""
    return f"""
__kernel void acc{k}(__global const float *in, __global float *out, int n) {{
    float acc[{k}];
    unsigned g = {GID};
#pragma unroll
    for (int i = 0; i < {k}; ++i) acc[i] = in[g * {k} + i];
    for (int it = 0; it < n; ++it) {{
#pragma unroll
        for (int i = 0; i < {k}; ++i) acc[i] = __builtin_fmaf(acc[i], acc[(i * 7 + 3) % {k}], 1.0f);
    }}
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < {k}; ++i) s += acc[i] * (float)i;
    out[g] = s;
}}"""


def clobber(name: str, *registers: str, attribute: str = "") -> str:
    """A kernel whose register count is pinned by an inline-asm clobber of the highest one."""
    regs = ", ".join(f'"{r}"' for r in registers)
    attr = f"__attribute__(({attribute})) " if attribute else ""
    return (
        f'__kernel {attr}void {name}(__global float *o) {{ __asm__ volatile("" ::: {regs}); o[0] = 1.0f; }}'
    )


def lds(size: int, workgroup: int) -> str:
    """A kernel that uses `size` bytes of LDS with workgroups of at most `workgroup` lanes."""
    n = size // 4
    return f"""
__kernel __attribute__((amdgpu_flat_work_group_size(1, {workgroup})))
void lds{size}_wg{workgroup}(__global float *o, __global const float *in) {{
    __local float t[{n}];
    unsigned l = __builtin_amdgcn_workitem_id_x();
    for (unsigned i = l; i < {n}; i += {workgroup}) t[i] = in[i];
    __builtin_amdgcn_s_barrier();
    o[l] = t[({n} - 1) - l % {n}];
}}"""


# VGPR counts on each side of every allocation granule (4, 8, 12, 16, 24) up to the 256 limit.
VGPRS = [1, 8, 9, 16, 17, 24, 25, 32, 33, 40, 41, 48, 49, 56, 57, 64, 65, 72, 73, 80, 81]
VGPRS += [84, 85, 96, 97, 101, 104, 105, 112, 113, 120, 121, 128, 129, 144, 145, 168, 169]
VGPRS += [170, 192, 193, 204, 205, 240, 241, 255, 256]
SGPRS = [8, 70, 76, 77, 78, 84, 85, 86, 94, 96, 97, 98, 100]  # clobbered index; counts add VCC etc.
AGPRS = [1, 32, 64, 65, 100, 128, 129, 200, 256]
WAVES_PER_EU = [
    "1,1",
    "2,2",
    "3,3",
    "4,4",
    "5,5",
    "6,6",
    "8,8",
    "10,10",
    "12,12",
    "16,16",
    "1,4",
    "4,16",
    "6",
]
WORKGROUPS = [32, 64, 128, 256, 512, 1024]
LDS_SIZES = [1024, 4096, 6144, 8192, 12288, 16384, 20000, 24576, 32768, 40000, 49152, 65536]


def kernel_source(processor: str) -> str:
    parts = [accumulators(k) for k in (2, 4, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 192, 256)]
    parts += [clobber(f"v{n}", f"v{n - 1}") for n in VGPRS]
    parts += [clobber(f"s{n}", f"s{n - 1}") for n in SGPRS]
    if processor in ("gfx908", "gfx90a", "gfx940", "gfx941", "gfx942"):  # targets with AGPRs
        parts += [clobber(f"a{n}", f"a{n - 1}") for n in AGPRS]
        parts += [clobber(f"va{n}", f"v{n - 1}", f"a{n - 1}") for n in (8, 64, 100, 128, 200)]
    parts += [
        clobber(f"wpe{w.replace(',', '_')}", "v0", attribute=f"amdgpu_waves_per_eu({w})")
        for w in WAVES_PER_EU
    ]
    parts += [clobber(f"wg{w}", "v0", attribute=f"amdgpu_flat_work_group_size(1, {w})") for w in WORKGROUPS]
    parts += [
        clobber(f"wg{w}_v{n}", f"v{n - 1}", attribute=f"amdgpu_flat_work_group_size(1, {w})")
        for w in (64, 1024)
        for n in (40, 100)
    ]
    parts += [lds(size, w) for size in LDS_SIZES for w in (64, 256, 1024)]
    return "\n".join(parts) + "\n"


# --- compiling and reading the remarks ----------------------------------------------------------


@dataclass(frozen=True)
class Build:
    kernels: list[AmdKernel]
    remark_occupancy: dict[str, int]  # kernel name -> the compiler's own figure


def remark_occupancy(stderr: str) -> dict[str, int]:
    """Kernel name -> `Occupancy [waves/SIMD]` from the kernel-resource-usage remarks, in order."""
    found: dict[str, int] = {}
    name = None
    for line in stderr.splitlines():
        if match := re.search(r"remark: Function Name: (\S+)", line):
            name = match.group(1)
        elif (match := re.search(r"remark:\s+Occupancy \[waves/SIMD\]: (\d+)", line)) and name:
            found[name] = int(match.group(1))
            name = None
    return found


def build(root: Path, processor: str, *flags: str, compiler: str = "clang-19", source: str = "") -> Build:
    tag = "_".join([processor, compiler, *(f.strip("-") for f in flags)])
    src, out = root / f"{tag}.cl", root / f"{tag}.hsaco"
    src.write_text(source or kernel_source(processor))
    cov = ["-mcode-object-version=6"] if processor.endswith("-generic") else []
    proc = subprocess.run(
        [compiler, *CL, f"-mcpu={processor}", *cov, *flags, *REMARKS, str(src), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    kernels = read_code_object(out.read_bytes(), out.name)
    return Build(kernels, remark_occupancy(proc.stderr))


# (processor, clang flags): the processors the brief names in both wave sizes where they have
# two, CU mode where it exists, and one member of every other table row and each generic target.
CASES = [
    ("gfx1030", ()),
    ("gfx1030", ("-mwavefrontsize64",)),
    ("gfx1030", ("-mcumode",)),
    ("gfx90a", ()),
    ("gfx1100", ()),
    ("gfx1100", ("-mwavefrontsize64",)),
    ("gfx1100", ("-mcumode",)),
    ("gfx1151", ()),
    ("gfx1151", ("-mwavefrontsize64",)),
    ("gfx1010", ()),
    ("gfx1010", ("-mwavefrontsize64",)),
    ("gfx1010", ("-mcumode", "-mwavefrontsize64")),
    ("gfx908", ()),
    ("gfx942", ()),
    ("gfx900", ()),
    ("gfx1102", ()),
    ("gfx1150", ("-mwavefrontsize64",)),
    ("gfx1200", ()),
    ("gfx1201", ("-mwavefrontsize64",)),
    ("gfx9-generic", ()),
    ("gfx10-1-generic", ()),
    ("gfx10-3-generic", ()),
    ("gfx11-generic", ()),
    ("gfx11-generic", ("-mwavefrontsize64",)),
    ("gfx12-generic", ()),
]


#: The cases `make check` compiles: those the tests after the first read too, and wave64 on
#: RDNA. The others are marked slow: every case compiles for `make test`.
CHECK_TIER_CASES = [
    ("gfx900", ()),
    ("gfx908", ()),
    ("gfx90a", ()),
    ("gfx1010", ()),
    ("gfx1030", ()),
    ("gfx1030", ("-mcumode",)),
    ("gfx1100", ()),
    ("gfx1100", ("-mwavefrontsize64",)),
]
#: One processor of each generation: `make check`'s share of the table's rows checked at the
#: granule boundaries (every row for `make test`).
CHECK_TIER_ROWS = {"gfx900", "gfx90a", "gfx942", "gfx1010", "gfx1030", "gfx1100", "gfx1151", "gfx1200"}


def slow_unless(kept: bool) -> tuple[pytest.MarkDecorator, ...]:
    return () if kept else (pytest.mark.slow,)


class Builds:
    """Compiles each (processor, flags) case once, on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[tuple[str, tuple[str, ...]], Build] = {}

    def __getitem__(self, case: tuple[str, tuple[str, ...]]) -> Build:
        if case not in self.done:
            self.done[case] = build(self.root, case[0], *case[1])
        return self.done[case]


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    return Builds(tmp_path_factory.mktemp("occupancy"))


# --- AMD: the model matches clang-19 kernel by kernel -------------------------------------------


@needs_clang19
@pytest.mark.parametrize(
    ("processor", "flags"),
    [
        pytest.param(p, f, id=" ".join((p, *f)), marks=slow_unless((p, f) in CHECK_TIER_CASES))
        for p, f in CASES
    ],
)
def test_model_matches_clang19_remarks(builds: Builds, processor: str, flags: tuple[str, ...]) -> None:
    result = builds[(processor, flags)]
    assert {k.name for k in result.kernels} == set(result.remark_occupancy)
    assert {k.processor for k in result.kernels} == {processor}
    wave = 64 if "-mwavefrontsize64" in flags or processor.startswith("gfx9") else 32
    assert {k.wavefront_size for k in result.kernels} == {wave}
    mismatches = []
    for kernel in result.kernels:
        model = amd_kernel_occupancy(kernel)
        if model.waves != result.remark_occupancy[kernel.name]:
            mismatches.append(
                (
                    kernel.name,
                    kernel.vgpr_count,
                    kernel.sgpr_count,
                    model,
                    result.remark_occupancy[kernel.name],
                )
            )
    assert mismatches == []
    # The suite must span occupancies, not sit at the ceiling: at least 5 distinct figures.
    assert len(set(result.remark_occupancy.values())) >= 5


NEWER_THAN_LLVM19 = {"gfx950", "gfx9-4-generic"}
BOUNDARIES = [clobber(f"v{n}", f"v{n - 1}") for n in VGPRS] + [clobber(f"s{n}", f"s{n - 1}") for n in SGPRS]
BOUNDARIES += [lds(size, w) for size in (4096, 20000, 40000) for w in (64, 1024)]


@needs_clang19
@pytest.mark.parametrize(
    "processor",
    [
        pytest.param(p, marks=slow_unless(p in CHECK_TIER_ROWS))
        for p in sorted(set(AMD_PROCESSORS) - NEWER_THAN_LLVM19)
    ],
)
def test_every_table_row_matches_clang19_at_the_granule_boundaries(tmp_path: Path, processor: str) -> None:
    """Every processor of the table that clang-19 knows, in each wave size it has."""
    waves = [()] if processor.startswith("gfx9") else [(), ("-mwavefrontsize64",)]
    for flags in waves:
        result = build(tmp_path, processor, *flags, source="\n".join(BOUNDARIES) + "\n")
        assert len(result.kernels) == len(BOUNDARIES)
        assert {k.name: amd_kernel_occupancy(k).waves for k in result.kernels} == result.remark_occupancy


@needs_clang19
@pytest.mark.parametrize("processor", sorted(NEWER_THAN_LLVM19))
def test_rows_newer_than_clang19_are_rejected_by_it(tmp_path: Path, processor: str) -> None:
    """These rows follow later LLVM releases and cannot be checked here: clang-19 refuses them."""
    source = tmp_path / "k.cl"
    source.write_text(clobber("k", "v0") + "\n")
    proc = subprocess.run(
        [
            "clang-19",
            *CL,
            f"-mcpu={processor}",
            "-mcode-object-version=6",
            "-c",
            str(source),
            "-o",
            os.devnull,
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert re.search(r"invalid target ID|unknown target CPU|not a recognized processor", proc.stderr)


@needs_clang19
def test_every_limiter_is_exercised(builds: Builds) -> None:
    """Each branch of the model decides some kernel's figure somewhere in the suite."""
    seen: dict[str, set[str]] = {}
    for processor, flags in (("gfx900", ()), ("gfx1010", ()), ("gfx1030", ("-mcumode",)), ("gfx1100", ())):
        result = builds[(processor, flags)]
        for kernel in result.kernels:
            seen.setdefault(amd_kernel_occupancy(kernel).limiter, set()).add(processor)
    assert set(seen) == {"vgpr", "sgpr", "lds", "workgroup", "max"}
    assert seen["sgpr"] == {"gfx900"}  # SGPRs bind only before GFX10


@needs_clang19
def test_agprs_count_towards_the_unified_file_on_gfx90a(builds: Builds) -> None:
    by_name = {k.name: k for k in builds[("gfx90a", ())].kernels}
    both = by_name["va100"]
    assert both.agpr_count is not None and both.agpr_count >= 100
    assert both.vgpr_count >= 200  # unified: VGPRs and AGPRs together
    remark = builds[("gfx90a", ())].remark_occupancy["va100"]
    assert amd_kernel_occupancy(both).waves == remark
    gfx908 = {k.name: k for k in builds[("gfx908", ())].kernels}["va100"]
    assert gfx908.vgpr_count < 200  # separate files: the larger of the two counts


@needs_clang19
def test_waves_per_eu_padding_is_in_the_descriptor_not_in_vgpr_count(builds: Builds) -> None:
    """clang pads the descriptor's VGPRs to enforce waves_per_eu; `.vgpr_count` stays small."""
    result = builds[("gfx900", ())]
    kernel = next(k for k in result.kernels if k.name == "wpe1_1")
    assert kernel.vgpr_count < 8 < kernel.descriptor_vgpr_granules * kernel.vgpr_granule
    naive = amd_occupancy(
        kernel.processor,
        kernel.wavefront_size,
        kernel.vgpr_count,
        kernel.sgpr_count,
        kernel.group_segment_fixed_size,
        kernel.max_flat_workgroup_size,
    )
    assert naive.waves != result.remark_occupancy[kernel.name] == amd_kernel_occupancy(kernel).waves


@needs_clang19
def test_cu_mode_is_read_from_the_code_object(builds: Builds) -> None:
    """-mcumode halves the LDS a workgroup shares; the model learns it from the metadata."""
    cu = builds[("gfx1030", ("-mcumode",))]
    wgp = builds[("gfx1030", ())]
    assert {k.workgroup_processor_mode for k in cu.kernels} == {False}
    assert {k.workgroup_processor_mode for k in wgp.kernels} == {True}
    differ = [k for k in cu.kernels if amd_kernel_occupancy(k) != amd_kernel_occupancy(k, wgp_mode=True)]
    assert differ, "no kernel of the suite is sensitive to CU mode"
    assert all(amd_kernel_occupancy(k).waves == cu.remark_occupancy[k.name] for k in differ)


@needs_clang19
@needs_clang15
def test_clang15_reports_a_different_figure_for_the_same_gfx1100_kernel(tmp_path: Path) -> None:
    """LLVM 15 modelled gfx11 with the 1024-register file; LLVM 19 and the model use 1536."""
    source = clobber("v101", "v100") + "\n"
    new = build(tmp_path, "gfx1100", source=source)
    old = build(tmp_path, "gfx1100", compiler="clang-15", source=source)
    (k19,), (k15,) = new.kernels, old.kernels
    assert k15.code_object_version == 4 and k19.code_object_version == 5
    assert k15.vgpr_count == k19.vgpr_count == 101
    assert amd_kernel_occupancy(k15) == amd_kernel_occupancy(k19)
    assert amd_kernel_occupancy(k15).waves == new.remark_occupancy["v101"]
    assert old.remark_occupancy["v101"] != new.remark_occupancy["v101"]
    assert old.remark_occupancy["v101"] < amd_kernel_occupancy(k15).waves


# --- AMD: inputs the model refuses ---------------------------------------------------------------


def test_unknown_processor_names_it_and_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown AMDGPU processor 'gfx999'; known: .*gfx1100.*gfx90a"):
        amd_occupancy("gfx999", 64, 32, 16, 0, 256)
    assert {"gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201"} <= set(AMD_PROCESSORS)
    assert {"gfx9-generic", "gfx10-1-generic", "gfx10-3-generic", "gfx11-generic"} <= set(AMD_PROCESSORS)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("gfx90a", 32, 8, 8, 0, 64), "gfx90a has no wave32"),
        (("gfx1100", 16, 8, 8, 0, 64), "gfx1100 has no wave16"),
        (("gfx1100", 32, -1, 8, 0, 64), "must be >= 0"),
        (("gfx1100", 32, 8, 8, 0, 0), "workgroup size >= 1"),
    ],
)
def test_impossible_inputs_are_refused(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        amd_occupancy(*args)
    with pytest.raises(ValueError, match="gfx908 has no WGP mode"):
        amd_occupancy("gfx908", 64, 8, 8, 0, 64, wgp_mode=True)


def test_limiter_is_max_only_at_the_ceiling() -> None:
    low = amd_occupancy("gfx1030", 32, 8, 8, 0, 256)
    assert (low.limiter, low.waves) == ("max", low.max_waves)
    assert low.unit == "waves/SIMD"
    high = amd_occupancy("gfx1030", 32, 256, 8, 0, 256)
    assert high.limiter == "vgpr" and high.waves < high.max_waves


# --- NVIDIA: the model against the toolkit's header ------------------------------------------------

# Per-SM properties as cudaGetDeviceProperties would give them, from NVIDIA CCCL
# libcudacxx/include/cuda/__device/arch_traits.h: (max threads per SM, shared memory per SM).
# Registers per SM and per block are 64 K, threads per block 1024, the default per-block shared
# memory 48 KiB, the opt-in limit the SM's shared memory less the reserve (1 KiB from sm_80 on).
DEVICE = {
    70: (2048, 96 * 1024),
    75: (1024, 64 * 1024),
    80: (2048, 164 * 1024),
    86: (1536, 100 * 1024),
    87: (1536, 164 * 1024),
    88: (1536, 100 * 1024),
    89: (1536, 100 * 1024),
    90: (2048, 228 * 1024),
    100: (2048, 228 * 1024),
    103: (2048, 228 * 1024),
    110: (1536, 228 * 1024),
    120: (1536, 100 * 1024),
    121: (1536, 100 * 1024),
}
HARNESS = r"""
#include <stdio.h>
#include "cuda_occupancy.h"
int main(void) {
    int sm, regs, threads, max_threads; long shared, shared_sm;
    while (scanf("%d %d %ld %d %d %ld", &sm, &regs, &shared, &threads, &max_threads, &shared_sm) == 6) {
        cudaOccDeviceProp prop;
        prop.computeMajor = sm / 10; prop.computeMinor = sm % 10;
        prop.maxThreadsPerBlock = 1024; prop.maxThreadsPerMultiprocessor = max_threads;
        prop.regsPerBlock = 65536; prop.regsPerMultiprocessor = 65536; prop.warpSize = 32;
        prop.sharedMemPerBlock = 48 * 1024; prop.sharedMemPerMultiprocessor = shared_sm;
        prop.numSms = 1;
        prop.reservedSharedMemPerBlock = sm >= 80 ? 1024 : 0;
        prop.sharedMemPerBlockOptin = shared_sm - prop.reservedSharedMemPerBlock;
        struct cudaFuncAttributes_ { int maxThreadsPerBlock, numRegs; size_t sharedSizeBytes, maxDynamicSharedSizeBytes; } a;
        a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = shared; a.maxDynamicSharedSizeBytes = 0;
        cudaOccFuncAttributes attr(a);  /* as the runtime converts cudaFuncAttributes */
        cudaOccDeviceState state;
        cudaOccResult result;
        cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state, threads, 0);
        printf("%d %d %u\n", (int)err, result.activeBlocksPerMultiprocessor, result.limitingFactors);
    }
    return 0;
}
"""
FACTOR_BITS = {"threads": 0x01, "registers": 0x02, "shared": 0x04, "blocks": 0x08}


def occupancy_header() -> Path | None:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    candidates = [Path(r) / "include" / "cuda_occupancy.h" for r in roots if r]
    candidates += sorted(Path("/usr/local").glob("cuda*/include/cuda_occupancy.h"))
    candidates.append(Path("/usr/include/cuda_occupancy.h"))
    return next((c for c in candidates if c.is_file()), None)


HEADER = occupancy_header()
CXX = shutil.which("g++") or shutil.which("clang++-19")


@pytest.fixture(scope="module")
def header_occupancy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CXX is None:
        pytest.skip("needs a C++ compiler")
    # Without a CUDA toolkit here, the header of CUDA 13.0.88's runtime wheel (cuda_wheels).
    header = HEADER or wheel_tree(load_toolchain().PINNED) / "include" / "cuda_occupancy.h"
    root = tmp_path_factory.mktemp("cuda_occupancy")
    (root / "harness.cpp").write_text(HARNESS)
    exe = root / "harness"
    subprocess.run(
        [CXX, "-O1", "-I", str(header.parent), str(root / "harness.cpp"), "-o", str(exe)],
        check=True,
        capture_output=True,
    )
    return exe


def test_cuda_model_matches_cuda_occupancy_h(header_occupancy: Path) -> None:
    registers = [0, 1, 16, 24, 32, 33, 37, 40, 48, 56, 64, 72, 80, 96, 128, 168, 200, 232, 255, 256]
    shared = [0, 1, 1000, 4096, 8192, 12288, 16384, 32768, 48 * 1024, 64 * 1024, 99 * 1024]
    shared += [100 * 1024, 163 * 1024, 164 * 1024, 200 * 1024, 227 * 1024, 228 * 1024]
    threads = [1, 32, 33, 64, 96, 128, 192, 256, 320, 384, 512, 640, 768, 1024, 1025]
    grid = [(sm, r, s, t) for sm in CUDA_ARCHES for r in registers for s in shared for t in threads]
    lines = "".join(f"{sm} {r} {s} {t} {DEVICE[sm][0]} {DEVICE[sm][1]}\n" for sm, r, s, t in grid)
    out = subprocess.run([str(header_occupancy)], input=lines, capture_output=True, text=True, check=True)
    rows = out.stdout.split("\n")[: len(grid)]
    assert len(rows) == len(grid)
    mismatches, limiters = [], set()
    for (sm, r, s, t), row in zip(grid, rows, strict=True):
        err, blocks, factors = map(int, row.split())
        assert err == 0, (sm, r, s, t)
        warps = -(-t // 32)
        model = cuda_occupancy(sm, r, s, t)
        limiters.add(model.limiter)
        if model.waves != blocks * warps:
            mismatches.append(((sm, r, s, t), model, blocks * warps))
        elif model.limiter == "max":
            assert model.waves == model.max_waves == DEVICE[sm][0] // 32
        elif blocks:
            assert factors & FACTOR_BITS[model.limiter], ((sm, r, s, t), model, factors)
    assert mismatches == []
    assert limiters == {"registers", "shared", "threads", "blocks", "max"}


def test_cuda_best_practices_guide_examples() -> None:
    """CUDA C++ Best Practices Guide, "Calculating Occupancy": on compute capability 7.0, 37
    registers per thread give 75% occupancy with 12 resident 128-thread blocks, and 63% with
    four 320-thread blocks."""
    small = cuda_occupancy(70, 37, 0, 128)
    assert (small.waves, small.max_waves, small.limiter) == (12 * 4, 64, "registers")
    large = cuda_occupancy(70, 37, 0, 320)
    assert (large.waves, large.limiter) == (4 * 10, "registers")
    assert int(100 * large.waves / large.max_waves + 0.5) == 63  # 62.5%, as the guide rounds it
    assert cuda_occupancy(70, 32, 0, 256).limiter == "max"  # "at most 32 registers" for 100%


def test_cuda_unknown_arch_and_bad_figures() -> None:
    with pytest.raises(ValueError, match=r"unknown CUDA arch sm_61; known: sm_70, .*sm_120"):
        cuda_occupancy(61, 32, 0, 128)
    with pytest.raises(ValueError, match="threads >= 1"):
        cuda_occupancy(80, 32, 0, 0)
    assert cuda_occupancy(80, 32, 0, 2048).waves == 0
    assert cuda_occupancy(80, 32, 0, 128).unit == "warps/SM"
