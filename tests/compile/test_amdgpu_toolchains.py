"""The AMDGPU readers on artifacts of the other toolchains a qualification meets.

tests/compile/test_amdgpu.py builds everything with clang-19 and header-less HIP. This file adds:
Debian's hipcc 5.2.3 (clang-15 underneath, the real HIP headers and rocm-device-libs bitcode)
building a two-translation-unit gfx1030 + gfx90a executable; clang-15's own HIP bundles and
objects for gfx1100 (code object V4); and clang-19 building the same HIP source for
gfx1030 + gfx90a with `--offload-compress` (a CCOB in the executable). As in test_amdgpu.py,
the expected side is always LLVM's tools on the same files (clang-offload-bundler-19 extracts,
llvm-readelf-19 prints the metadata), through that module's helpers; no resource figure is
written here. A test skips, naming the package, when a toolchain is not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_amdgpu import BUNDLER, Artifacts, assert_matches_readelf, fatbin_slices, sha

from qualify.compile.amdgpu import base_name, iter_kernels, read_code_object
from qualify.compile.offloadbundle import iter_code_objects

KERNELS = Path(__file__).parent / "kernels"
LLVM19 = [BUNDLER, "llvm-readelf-19", "llvm-objcopy-19"]
# slow: hipcc, clang-15 and clang-19 build real HIP executables (3 s a build on 2 cores).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        any(shutil.which(t) is None for t in LLVM19),
        reason="needs clang-offload-bundler-19, llvm-readelf-19, llvm-objcopy-19 (apt-get install clang-tools-19 llvm-19)",
    ),
]
DEVICE_LIBS = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")  # Debian's rocm-device-libs
ARCHS = ["--offload-arch=gfx1030", "--offload-arch=gfx90a"]
HIP_HOST_IDS = {"hipcc": "host-x86_64-unknown-linux", "clang-19": "host-x86_64-unknown-linux--"}

# Real HIP: the HIP headers' builtins (threadIdx, __syncthreads) and an ocml call (sqrtf), so the
# build must link the rocm-device-libs bitcode.
TU_ONE = """
#include <hip/hip_runtime.h>
extern "C" __global__ void scale(float *x, float a) { x[blockIdx.x * blockDim.x + threadIdx.x] *= a; }
template <int K> __global__ void tile_sum(const float *in, float *out) {
    __shared__ float tile[K];
    unsigned l = threadIdx.x;
    tile[l % K] = in[l];
    __syncthreads();
    out[l] = tile[(l + 1) % K] + sqrtf(in[l]);
}
template __global__ void tile_sum<512>(const float *, float *);
namespace { __global__ void hidden(float *x) { x[threadIdx.x] *= 2.0f; } }
void launch_hidden(float *x) { hipLaunchKernelGGL(hidden, dim3(1), dim3(64), 0, 0, x); }
"""
TU_TWO = """
#include <hip/hip_runtime.h>
extern "C" __global__ void second(float *x) { x[threadIdx.x] += 1.0f; }
int main() { return 0; }
"""


def need(*tools: str, package: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (apt-get install {package})")


def compile_(args: list[str | Path], env: dict[str, str] | None = None) -> None:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
    if proc.returncode:
        pytest.fail(f"{' '.join(map(str, args))} failed:\n{proc.stderr[-4000:]}")


class Builds(Artifacts):
    """This file's artifacts, each built once; the LLVM-tool side comes from Artifacts."""

    def source(self, name: str, text: str) -> Path:
        path = self.root / name
        if not path.exists():
            path.write_text(text)
        return path

    def get(self, name: str) -> Path:
        if name not in self.built:
            recipe = {
                "hipcc.exe": self.hipcc_exe,
                "clang19_ccob.exe": self.clang19_ccob_exe,
                "clang15_gfx1100.hipfb": self.clang15_hipfb,
                "clang15_gfx1100.o": self.clang15_o,
            }[name]
            recipe(self.root / name)
            self.built[name] = self.root / name
        return self.built[name]

    def hipcc_exe(self, out: Path) -> None:
        need("hipcc", "clang-15", package="hipcc")
        if not DEVICE_LIBS.is_dir():
            pytest.skip(f"needs rocm-device-libs bitcode in {DEVICE_LIBS} (apt-get install rocm-device-libs)")
        # Debian's hipcc targets NVIDIA when it finds a CUDA install; this asks for AMD.
        env = {**os.environ, "HIP_PLATFORM": "amd"}
        tus = [self.source("one.hip", TU_ONE), self.source("two.hip", TU_TWO)]
        compile_(["hipcc", *ARCHS, "-O3", *tus, "-o", out], env=env)

    def clang19_ccob_exe(self, out: Path) -> None:
        need("clang++-19", package="clang-19")
        if not DEVICE_LIBS.is_dir() or not Path("/usr/include/hip/hip_runtime.h").is_file():
            pytest.skip("needs Debian's HIP headers and rocm-device-libs (apt-get install hipcc)")
        tus = [self.source("one.hip", TU_ONE), self.source("two.hip", TU_TWO)]
        rocm = ["--rocm-path=/usr", f"--rocm-device-lib-path={DEVICE_LIBS}", "-D__HIP_PLATFORM_AMD__"]
        link = ["--hip-link", "-lamdhip64"]  # Debian's libamdhip64-dev, a dependency of hipcc
        compile_(
            ["clang++-19", "-x", "hip", *ARCHS, "-O3", *rocm, "--offload-compress", *tus, "-o", out, *link]
        )

    def clang15_hipfb(self, out: Path) -> None:
        need("clang++-15", package="clang-15")
        hip = [
            "-x",
            "hip",
            "--offload-arch=gfx1100",
            "--offload-arch=gfx1030",
            "-nogpulib",
            "-nogpuinc",
            "-O3",
        ]
        compile_(["clang++-15", *hip, "--offload-device-only", "-c", KERNELS / "tu_one.hip", "-o", out])

    def clang15_o(self, out: Path) -> None:
        need("clang++-15", package="clang-15")
        hip = ["-x", "hip", "--offload-arch=gfx1100", "-nogpulib", "-nogpuinc", "-O3", "-fPIC"]
        compile_(["clang++-15", *hip, "-c", KERNELS / "tu_one.hip", "-o", out])


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    return Builds(tmp_path_factory.mktemp("toolchains"))


ARTIFACTS = ["hipcc.exe", "clang19_ccob.exe", "clang15_gfx1100.hipfb", "clang15_gfx1100.o"]


@pytest.mark.parametrize("name", ARTIFACTS)
def test_every_code_object_and_figure_matches_the_llvm_tools(builds: Builds, name: str) -> None:
    path = builds.get(name)
    expected = builds.tool_code_objects(path)
    assert expected, f"the LLVM tools find no code object in {name}"
    blobs = list(iter_code_objects(path.read_bytes(), name))
    assert sorted((b.bundle_id, sha(b.data)) for b in blobs) == sorted(
        (bundle_id, sha(file.read_bytes())) for bundle_id, file in expected
    )
    tool_file = {sha(file.read_bytes()): file for _, file in expected}
    for blob in blobs:
        assert_matches_readelf(read_code_object(blob.data, blob.source), tool_file[sha(blob.data)])


@pytest.mark.parametrize(("name", "cov"), [("hipcc.exe", 4), ("clang19_ccob.exe", 5)])
def test_two_translation_units_for_gfx1030_and_gfx90a(builds: Builds, name: str, cov: int) -> None:
    found = list(iter_kernels(builds.get(name).read_bytes(), name))
    by_processor: dict[str, list[str]] = {}
    for _, kernel in found:
        by_processor.setdefault(kernel.processor, []).append(base_name(kernel.name))
    assert set(by_processor) == {"gfx1030", "gfx90a"}
    assert sorted(by_processor["gfx1030"]) == sorted(by_processor["gfx90a"])
    assert {"scale", "second", "_Z8tile_sumILi512EEvPKfPf"} <= set(by_processor["gfx90a"])
    assert {k.code_object_version for _, k in found} == {cov}
    assert len({b.source.split(" entry ")[0] for b, _ in found}) == 2  # one blob per translation unit
    assert all(k.descriptor_consistent for _, k in found)
    assert {k.agpr_count is not None for _, k in found if k.processor == "gfx90a"} == {True}
    if name == "clang19_ccob.exe":
        assert all("CCOB v2 zstd" in b.source for b, _ in found)


@pytest.mark.parametrize(("name", "toolchain"), [("hipcc.exe", "hipcc"), ("clang19_ccob.exe", "clang-19")])
def test_host_entry_spellings_are_listed_by_the_bundler_and_skipped(
    builds: Builds, name: str, toolchain: str
) -> None:
    """hipcc 5.2.3 (clang-15) writes `host-x86_64-unknown-linux`, clang-19 adds a trailing `--`."""
    path = builds.get(name)
    dumped = path.with_name(path.name + ".section")
    builds.run("llvm-objcopy-19", f"--dump-section=.hip_fatbin={dumped}", path, f"{dumped}.copy")
    for offset, blob in fatbin_slices(dumped.read_bytes()):
        piece = path.with_name(f"{path.name}.listed@{offset:x}")
        piece.write_bytes(blob)
        ids = builds.run(BUNDLER, "--list", "--type=o", f"--input={piece}").split()
        hosts = [i for i in ids if i.startswith("host-")]
        assert hosts == [HIP_HOST_IDS[toolchain]]
        ours = sorted(b.bundle_id or "" for b in iter_code_objects(blob, piece.name))
        assert ours == sorted(i for i in ids if not i.startswith("host-"))


def test_clang15_writes_code_object_v4_for_gfx1100(builds: Builds) -> None:
    bundle = [k for _, k in iter_kernels(builds.get("clang15_gfx1100.hipfb").read_bytes(), "hipfb")]
    assert {k.processor for k in bundle} == {"gfx1100", "gfx1030"}
    obj = [k for _, k in iter_kernels(builds.get("clang15_gfx1100.o").read_bytes(), "o")]
    assert {k.processor for k in obj} == {"gfx1100"}
    for kernel in bundle + obj:
        assert kernel.code_object_version == 4
        assert kernel.workgroup_processor_mode is None  # a V5 key
        assert kernel.descriptor_consistent, kernel.descriptor_mismatches()
    ids = builds.run(BUNDLER, "--list", "--type=o", f"--input={builds.get('clang15_gfx1100.hipfb')}").split()
    assert HIP_HOST_IDS["hipcc"] in ids  # clang-15 itself spells the host entry without `--`
