"""How fast `qualify.compile.amdgpu.iter_kernels` reads a large HIP fat binary, next to LLVM's tools.

Builds, with clang-19 in a temporary (or given) directory, two shared libraries that hold the
same device code: one with plain offload bundles, one with compressed bundles (CCOB,
`--offload-compress`). Each links several copies of a few generated translation units (each
copy is one 4096-aligned blob in `.hip_fatbin`, as in a library built from many sources),
every unit holding many kernels of varying register pressure for several processors.

Then, per library, it times:
- qualify: `iter_kernels` over the file's bytes (reading the file included), best of --repeat;
- the LLVM tools, as a script without qualify would do it: `llvm-objcopy-19 --dump-section`
  for `.hip_fatbin`, the blob starts found by a magic scan, then per blob
  `clang-offload-bundler-19 --list` and one `--unbundle` of all device entries, then
  `llvm-readelf-19 --notes` per extracted code object; one process at a time.

Both sides must find the same number of kernels, or the script stops. The figures are wall
times of this machine, printed, never judged.

    python benchmarks/kernel_extraction.py [--units 6] [--kernels 32] [--copies 6]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ARCHS = "gfx1030,gfx90a,gfx942,gfx1100,gfx1151,gfx1201"
TOOLS = ["clang++-19", "clang-offload-bundler-19", "llvm-readelf-19", "llvm-objcopy-19"]
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"

# Header-less HIP (-nogpuinc): the attributes and launch API the host stubs refer to.
PRELUDE = """\
#define __global__ __attribute__((global))
typedef unsigned long size_t;
struct dim3 {
    unsigned x, y, z;
    __attribute__((host, device)) dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
};
typedef struct ihipStream_t *hipStream_t;
extern "C" int __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shmem = 0, hipStream_t s = 0);
extern "C" int hipLaunchKernel(const void *f, dim3 grid, dim3 block, void **args, size_t shmem,
                               hipStream_t s);
namespace {
"""

KERNEL = """\
__global__ void u{unit}_k{index}(const float *in, float *out, int n) {{
    float acc[{live}];
    unsigned g = __builtin_amdgcn_workgroup_id_x() * 256u + __builtin_amdgcn_workitem_id_x();
#pragma unroll
    for (int j = 0; j < {live}; ++j) acc[j] = in[g * {live} + j];
    for (int it = 0; it < n; ++it) {{
#pragma unroll
        for (int j = 0; j < {live}; ++j)
            acc[j] = __builtin_fmaf(acc[j], acc[(j * 7 + {step}) % {live}], {index}.0f);
    }}
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < {live}; ++j) s += acc[j] * (float)j;
    out[g] = s;
}}
"""


def unit_source(unit: int, kernels: int) -> str:
    """One translation unit. Its kernels have internal linkage, so copies of its object link
    together without clashing host stubs; a `used` table keeps the kernels emitted."""
    body = [
        KERNEL.format(unit=unit, index=i, live=8 + (i * 13 + unit * 5) % 120, step=i % 5 + 1)
        for i in range(kernels)
    ]
    table = ", ".join(f"(void *)&u{unit}_k{i}" for i in range(kernels))
    return (
        PRELUDE
        + "".join(body)
        + "}  // namespace\n"
        + f"__attribute__((used)) static void *const kernels[] = {{{table}}};\n"
    )


def run(args: list[str | Path]) -> str:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(f"{' '.join(map(str, args))} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def build(work: Path, units: int, kernels: int, copies: int, archs: list[str], jobs: int) -> dict[str, Path]:
    """The two libraries, reused when `work` already holds them (delete it to rebuild)."""
    libraries = {"plain": work / "fat_plain.so", "compressed": work / "fat_ccob.so"}
    if all(p.exists() for p in libraries.values()):
        return libraries
    hip = ["-x", "hip", *(f"--offload-arch={a}" for a in archs), "-nogpulib", "-nogpuinc", "-O3", "-fPIC"]
    jobs_list = []
    for unit in range(units):
        source = work / f"unit{unit}.hip"
        source.write_text(unit_source(unit, kernels))
        jobs_list.append(["clang++-19", *hip, "-c", source, "-o", work / f"unit{unit}.o"])
        jobs_list.append(
            ["clang++-19", *hip, "--offload-compress", "-c", source, "-o", work / f"unit{unit}_ccob.o"]
        )
    started = time.perf_counter()
    print(f"compiling {units} units x {kernels} kernels for {', '.join(archs)} ({jobs} jobs) ...", flush=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(run, jobs_list))
    print(f"  compiled in {time.perf_counter() - started:.0f} s", flush=True)
    for kind, suffix in (("plain", ""), ("compressed", "_ccob")):
        objects = [work / f"unit{u}{suffix}.o" for _ in range(copies) for u in range(units)]
        # Copies of one object repeat the translation unit's (unused) CUID symbol; the first wins.
        run(["clang++-19", "-shared", "-Wl,--allow-multiple-definition", *objects, "-o", libraries[kind]])
    return libraries


def time_qualify(path: Path, repeat: int) -> tuple[float, int, int]:
    """(best seconds, code objects, kernels) of iter_kernels over the file."""
    from qualify.compile.amdgpu import iter_kernels

    best, blobs, count = float("inf"), 0, 0
    for _ in range(repeat):
        started = time.perf_counter()
        found = list(iter_kernels(path.read_bytes(), path.name))
        best = min(best, time.perf_counter() - started)
        blobs, count = len({id(b) for b, _ in found}), len(found)
    return best, blobs, count


def blob_slices(section: bytes) -> list[bytes]:
    """Bundles and CCOBs at 4096-aligned starts; a CCOB v2/v3 ends at its size field, as the
    bundler reads past a V2 stream's end otherwise."""
    starts = [o for o in range(0, len(section), 4096) if section.startswith((BUNDLE_MAGIC, b"CCOB"), o)]
    slices = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(section)
        if section.startswith(b"CCOB", start):
            version = struct.unpack_from("<H", section, start + 4)[0]
            if version == 2:
                end = start + struct.unpack_from("<I", section, start + 8)[0]
            elif version >= 3:
                end = start + struct.unpack_from("<Q", section, start + 8)[0]
        slices.append(section[start:end])
    return slices


def time_tools(path: Path, scratch: Path) -> tuple[float, int, int, int]:
    """(seconds, code objects, kernels, processes) of the LLVM-tool pipeline over the file."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    started = time.perf_counter()
    section = scratch / "hip_fatbin"
    run(["llvm-objcopy-19", f"--dump-section=.hip_fatbin={section}", path, scratch / "stripped"])
    processes, objects, kernels = 1, 0, 0
    for number, blob in enumerate(blob_slices(section.read_bytes())):
        piece = scratch / f"blob{number}"
        piece.write_bytes(blob)
        ids = run(["clang-offload-bundler-19", "--list", "--type=o", f"--input={piece}"]).split()
        device = [i for i in ids if not i.startswith("host-")]
        outputs = [scratch / f"blob{number}.{i.replace(':', '_')}" for i in device]
        run(
            [
                "clang-offload-bundler-19",
                "--unbundle",
                "--type=o",
                f"--input={piece}",
                f"--targets={','.join(device)}",
                *(f"--output={o}" for o in outputs),
            ]
        )
        processes += 2
        for output in outputs:
            notes = run(["llvm-readelf-19", "--notes", output])
            processes += 1
            objects += 1
            kernels += len(re.findall(r"^\s+\.symbol:", notes, re.M))
    return time.perf_counter() - started, objects, kernels, processes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="Prints a table; asserts nothing."
    )
    parser.add_argument("--units", type=int, default=6, help="distinct translation units (default 6)")
    parser.add_argument("--kernels", type=int, default=32, help="kernels per unit (default 32)")
    parser.add_argument("--copies", type=int, default=6, help="times each unit is linked in (default 6)")
    parser.add_argument("--archs", default=ARCHS, help=f"comma-separated processors (default {ARCHS})")
    parser.add_argument(
        "--repeat", type=int, default=3, help="qualify runs per file; the best counts (default 3)"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compiles")
    parser.add_argument("--workdir", type=Path, help="build here and keep it (reused on the next run)")
    args = parser.parse_args(argv)
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        parser.error(f"needs {', '.join(missing)} (apt-get install clang-19 clang-tools-19 llvm-19 lld-19)")

    with tempfile.TemporaryDirectory(prefix="kernel-extraction-") as temp:
        work = args.workdir or Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        libraries = build(work, args.units, args.kernels, args.copies, args.archs.split(","), args.jobs)
        header = f"{'file':<12} {'MB':>6} {'objects':>7} {'kernels':>7}   {'qualify s':>9} {'MB/s':>7}"
        header += f"   {'tools s':>8} {'MB/s':>6} {'procs':>5}   {'ratio':>6}"
        print(header)
        for kind, path in libraries.items():
            size = path.stat().st_size / 1e6
            ours, objects, kernels = time_qualify(path, args.repeat)
            theirs, tool_objects, tool_kernels, processes = time_tools(path, work / f"tools_{kind}")
            if (objects, kernels) != (tool_objects, tool_kernels):
                sys.exit(
                    f"{path.name}: qualify found {objects}/{kernels}, the tools {tool_objects}/{tool_kernels}"
                )
            print(
                f"{kind:<12} {size:>6.1f} {objects:>7} {kernels:>7}   {ours:>9.3f} {size / ours:>7.1f}"
                f"   {theirs:>8.2f} {size / theirs:>6.2f} {processes:>5}   {theirs / ours:>5.0f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
