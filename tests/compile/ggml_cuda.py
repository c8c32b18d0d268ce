"""ggml's CUDA sources from the example's llama-cpp-python sdist, compiled by real nvcc releases.

The sdist is the fixed-output store path examples/llama-cpp/setup.sh adds. Of its
`vendor/llama.cpp/ggml` tree, the headers (`include/`, `src/*.h`, `src/ggml-cuda/**/*.cuh`
and `vendors/`) and the compiled sources are extracted once into test-artifacts/cuda. Each
source is compiled to a cubin for sm_90 with ptxas's `-v` report kept beside it, with the flags
ggml's CMake gives every ggml-cuda source in a Release build of shared libraries (see
`DEFINES`, `FLAGS`); outputs are cached by toolchain version and a hash of the sdist, the
source and the command line, so a second run compiles nothing.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from cuda_wheels import ARTIFACTS, load_toolchain
from ggml_sdist import SDIST_SHA256
from ggml_sdist import ggml_tree as extract_ggml

TOOLCHAINS = (load_toolchain().PINNED, load_toolchain().CANDIDATE)

# Under ggml/src/ggml-cuda, the longest compile first (seconds on one core, 13.0 / 13.5,
# measured): mmvq.cu 51 / 68 s (317 kernels), the q4_0 MMQ instance 25 / 32 s (64 kernels,
# one of which spills), the f16/f16 vector flash attention instance 9 / 10 s (29 kernels).
SOURCES = (
    "mmvq.cu",
    "template-instances/mmq-instance-q4_0.cu",
    "template-instances/fattn-vec-instance-f16-f16.cu",
)
# CMake's Release flags (-O3 -DNDEBUG) and the definitions ggml sets for the ggml-cuda target
# of a shared build: ggml/src/CMakeLists.txt (GGML_SCHED_MAX_COPIES, the feature macros on
# Linux, GGML_BACKEND_BUILD/SHARED, GGML_SHARED from ggml-base) and GGML_CUDA_USE_GRAPHS, on
# by default under llama.cpp. GGML_USE_CUDA is a definition for users of `ggml`, which
# ggml-cuda does not link, and no ggml-cuda source tests it.
DEFINES = (
    "-DNDEBUG",
    "-DGGML_SCHED_MAX_COPIES=4",
    "-D_GNU_SOURCE",
    "-D_XOPEN_SOURCE=600",
    "-DGGML_BACKEND_BUILD",
    "-DGGML_BACKEND_SHARED",
    "-DGGML_SHARED",
    "-DGGML_CUDA_USE_GRAPHS",
)
# ggml/src/ggml-cuda/CMakeLists.txt: CUDA_FLAGS and CUDA_CXX_FLAGS (-compress-mode only
# affects fatbins, not a cubin).
FLAGS = ("-O3", "-use_fast_math", "-extended-lambda", "-Xcompiler", "-Wno-pedantic")


@dataclass(frozen=True)
class Build:
    version: str
    source: Path
    cubin: Path
    log: Path

    @property
    def stem(self) -> str:
        return self.source.stem


def _wanted(rel: str) -> bool:
    cuda = "src/ggml-cuda/"
    if rel.startswith("include/") or (rel.startswith("src/") and rel.count("/") == 1 and rel.endswith(".h")):
        return True
    return rel.startswith(cuda) and (
        rel.endswith((".cuh", "CMakeLists.txt")) or "/vendors/" in rel or rel[len(cuda) :] in SOURCES
    )


def ggml_tree(sdist: Path) -> Path:
    """test-artifacts/cuda/ggml-<sha>: the part of the sdist's ggml tree the compiles read."""
    return extract_ggml(sdist, ARTIFACTS, _wanted)


def command(nvcc: Path, ggml: Path) -> list[str]:
    """nvcc's command line for one ggml-cuda source, less the source and -o."""
    includes = [f"-I{ggml / d}" for d in ("include", "src", "src/ggml-cuda")]
    return [str(nvcc), "-arch=sm_90", "-cubin", "-Xptxas", "-v", *FLAGS, *DEFINES, *includes]


def compile_all(ggml: Path, trees: Mapping[str, Path]) -> dict[tuple[str, str], Build]:
    """Every source of SOURCES by every toolchain of `trees`, compiled on all cores unless cached."""
    builds: dict[tuple[str, str], Build] = {}
    todo: list[tuple[list[str], Build]] = []
    for source in SOURCES:
        for version, tree in trees.items():
            path = ggml / "src" / "ggml-cuda" / source
            argv = command(tree / "bin" / "nvcc", ggml)
            # The command line names the tree's absolute path; the key must not.
            flags = "\0".join(argv[1:]).replace(str(ggml), "GGML")
            key = hashlib.sha256(f"{SDIST_SHA256}\0{source}\0{flags}".encode()).hexdigest()[:16]
            out = ARTIFACTS / "ggml-out" / version / f"{path.stem}-{key}"
            build = Build(version, path, out.with_suffix(".cubin"), out.with_suffix(".log"))
            builds[(version, source)] = build
            if not (build.cubin.is_file() and build.log.is_file()):
                todo.append(([*argv, str(path)], build))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failures = [f for f in pool.map(lambda job: _compile(*job), todo) if f]
    if failures:
        pytest.fail("\n\n".join(failures))
    return builds


def _compile(argv: list[str], build: Build) -> str | None:
    """Compile to temporary names and rename both outputs when nvcc succeeds; else the error."""
    build.cubin.parent.mkdir(parents=True, exist_ok=True)
    cubin = build.cubin.with_name(f".{build.cubin.name}.{os.getpid()}")
    proc = subprocess.run([*argv, "-o", str(cubin)], capture_output=True, text=True, check=False)
    if proc.returncode or not cubin.is_file():
        cubin.unlink(missing_ok=True)
        return f"CUDA {build.version}: {' '.join(argv)} failed:\n{proc.stderr[-4000:]}"
    log = build.log.with_name(f".{build.log.name}.{os.getpid()}")
    log.write_text(proc.stdout + proc.stderr)
    cubin.rename(build.cubin)
    log.rename(build.log)
    return None
