"""How long the compile stage takes to read a whole HIP library, next to the toolchain's llvm-objdump.

Given a library (an arm's `lib/libggml-hip.so`) and the disassembler the check would use (the
arm's `libexec/toolchain/llvm-objdump`, which runs the toolchain's own inside its root), it times:

- qualify: `qualify.compile.scan.scan` of the library with the instruction mix, as the
  `kernel-resources` check measures a role: the offload bundles read and decompressed, every
  kernel's resources, every code object disassembled (one process per code object, on every
  core) and parsed;
- the baseline: the same llvm-objdump with the same options over the same code objects
  (extracted beforehand, not timed), one process for all of them, its output thrown away; and,
  for comparison, one process per code object on every core, as qualify runs it.

Each side is timed --repeat times, interleaved, and the best of each is printed with the ratio.
The figures are this machine's, printed, never judged.

    python benchmarks/instruction_mix.py LIBRARY --objdump CMD [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qualify.compile.disassembly import probe
from qualify.compile.mixreading import OBJDUMP_OPTIONS, MixReading
from qualify.compile.offloadbundle import iter_code_objects
from qualify.compile.scan import scan
from qualify.core.environment import child_env


def qualify_once(library: Path, objdump: list[str], work: Path) -> tuple[float, int, int]:
    """(seconds, kernels, kernels with a mix) of one scan with the instruction mix."""
    tool = probe(objdump, OBJDUMP_OPTIONS, child_env())
    started = time.perf_counter()
    reading = MixReading(amdgpu=tool, folder=work)
    try:
        found = scan(library, host_patterns=(), mix=reading)
    finally:
        reading.close()
    seconds = time.perf_counter() - started
    table = found.tables["amdgpu"]
    return seconds, len(table), int(table["instructions"].notna().sum())


def baseline_once(objdump: list[str], files: list[Path], parallel: bool) -> float:
    started = time.perf_counter()
    if parallel:

        def one(path: Path) -> None:
            subprocess.run([*objdump, *OBJDUMP_OPTIONS, path.name], cwd=path.parent,
                           stdout=subprocess.DEVNULL, check=True)  # fmt: skip

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            list(pool.map(one, files))
    else:
        subprocess.run([*objdump, *OBJDUMP_OPTIONS, *(p.name for p in files)], cwd=files[0].parent,
                       stdout=subprocess.DEVNULL, check=True)  # fmt: skip
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("library", type=Path)
    parser.add_argument("--objdump", required=True, help="the disassembler command (shell words)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    objdump = shlex.split(args.objdump)
    with tempfile.TemporaryDirectory(prefix="mix-bench-") as tmp:
        work = Path(tmp)
        os.environ["TMPDIR"] = tmp  # the wrapper binds $TMPDIR into the toolchain's root
        blobs = list(iter_code_objects(args.library.read_bytes(), args.library.name))
        files = []
        for i, blob in enumerate(blobs):
            files.append(work / f"{i}.co")
            files[-1].write_bytes(blob.data)
        size = sum(len(b.data) for b in blobs)
        print(f"{args.library}: {len(blobs)} code objects, {size / 2**20:.1f} MiB of code objects")
        times: dict[str, list[float]] = {"qualify": [], "objdump": [], "objdump-parallel": []}
        counted = (0, 0)
        for _ in range(args.repeat):
            seconds, kernels, with_mix = qualify_once(args.library, objdump, work)
            times["qualify"].append(seconds)
            counted = (kernels, with_mix)
            times["objdump"].append(baseline_once(objdump, files, parallel=False))
            times["objdump-parallel"].append(baseline_once(objdump, files, parallel=True))
    best = {k: min(v) for k, v in times.items()}
    print(f"kernels {counted[0]}, with an instruction mix {counted[1]}")
    print(f"qualify (resources + instruction mix, {os.cpu_count()} cores): {best['qualify']:.2f} s")
    print(f"llvm-objdump, one process:                {best['objdump']:.2f} s"
          f"  ratio {best['qualify'] / best['objdump']:.2f} (target ≤ 2)")  # fmt: skip
    print(f"llvm-objdump, one per code object:        {best['objdump-parallel']:.2f} s"
          f"  ratio {best['qualify'] / best['objdump-parallel']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
