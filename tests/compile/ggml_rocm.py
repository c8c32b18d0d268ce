"""ggml's HIP sources from the example's llama-cpp-python sdist, compiled by Debian's two ROCm
stacks (the example's toolchain roots, examples/llama-cpp-rocm/rocm_toolchain.py).

The roots are made from the pinned .debs into test-artifacts/rocm/<version> on first use (about
1.6 GB from Debian's archive) and kept; each compile runs the root's clang inside the root with
bubblewrap (the example's enter-root.sh), with the flags ggml's CMake gives every ggml-hip source
in a Release build of shared libraries (`command`). Outputs are object files, as the build
leaves them before linking (their `.hip_fatbin` holds the offload bundle), cached by toolchain,
target and a hash of the sdist, the source and the command line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from ggml_sdist import SDIST_SHA256, sdist_path
from ggml_sdist import ggml_tree as extract_ggml

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "llama-cpp-rocm"
ARTIFACTS = REPO / "test-artifacts" / "rocm"
LLVM = {"6.4.3": "21", "7.2.4": "22"}  # each root's clang

# Under ggml/src/ggml-cuda (ggml-hip compiles ggml-cuda's sources as HIP), with the seconds one
# core took for gfx1151 (6.4.3 / 7.2.4, measured): mmvq.cu 59 / 62 s (317 kernels), the
# head-size-128 tile flash-attention instance 58 / 64 s (92), the q4_K MMQ instance 33 / 30 s (64).
SOURCES = (
    "mmvq.cu",
    "template-instances/fattn-tile-instance-dkq128-dv128.cu",
    "template-instances/mmq-instance-q4_k.cu",
)
# ggml's CMake for the ggml-hip target of a shared Release build (ggml/src/CMakeLists.txt,
# ggml-hip/CMakeLists.txt): the same list as its compile_commands.json, less the includes.
DEFINES = (
    "-DGGML_BACKEND_BUILD",
    "-DGGML_BACKEND_SHARED",
    "-DGGML_HIP_GRAPHS",
    "-DGGML_HIP_NO_VMM",
    "-DGGML_SCHED_MAX_COPIES=4",
    "-DGGML_SHARED",
    "-DGGML_USE_HIP",
    "-DUSE_PROF_API=1",
    "-D_GNU_SOURCE",
    "-D_XOPEN_SOURCE=600",
    "-D__HIP_PLATFORM_AMD__=1",
    "-D__HIP_ROCclr__=1",
    "-Dggml_hip_EXPORTS",
)
FLAGS = ("-O3", "-DNDEBUG", "-std=gnu++17", "-fPIC")
# The compiler's own per-kernel report (registers, spills, LDS, occupancy) on stderr, kept beside
# each object: diagnostics only, the code is the same.
REMARKS = ("-Rpass-analysis=kernel-resource-usage",)
# What is compiled: every source for gfx1151 (Strix Halo: RDNA 3.5, wave32), and the MMQ
# instance, the shortest, for the Instinct targets too (gfx942 MI300X, gfx950 MI350: wave64,
# AGPRs), so that every target of the example is read from a real object.
TARGET = "gfx1151"
JOBS = (
    *((source, TARGET) for source in SOURCES),
    ("template-instances/mmq-instance-q4_k.cu", "gfx942"),
    ("template-instances/mmq-instance-q4_k.cu", "gfx950"),
)
# GGML_CUDA_FA_QUANTS' default: which K/V type pairs the flash-attention sources instantiate.
_FA_TYPES = ("BF16", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")
_FA_ON = {("Q4_0", "Q4_0"), ("Q8_0", "Q8_0"), ("F16", "F16"), ("BF16", "BF16")}


def fa_defines() -> list[str]:
    pairs = [f"-DGGML_CUDA_FA_{k}_{v}={int((k, v) in _FA_ON)}" for k in _FA_TYPES for v in _FA_TYPES]
    return [*pairs, '-DGGML_CUDA_FA_QUANTS="q4_0-q4_0,q8_0-q8_0,f16-f16,bf16-bf16"']


@dataclass(frozen=True)
class Build:
    version: str
    target: str
    source: Path
    obj: Path

    @property
    def log(self) -> Path:
        """clang's kernel-resource-usage remarks for this object."""
        return self.obj.with_suffix(".log")

    @property
    def stem(self) -> str:
        return self.source.stem


def load_toolchain() -> ModuleType:
    """examples/llama-cpp-rocm/rocm_toolchain.py as a module (it is a script, not a package)."""
    name = "rocm_toolchain"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE / "rocm_toolchain.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def archive_reachable() -> bool:
    try:
        httpx.head(f"{load_toolchain().ARCHIVE}/dists/sid/Release", timeout=10, follow_redirects=True)
    except httpx.HTTPError:
        return False
    return True


_OFFLINE: dict[str, str] = {}


def root_tree(version: str) -> Path:
    """test-artifacts/rocm/<version>, made from the pinned .debs unless it is there and complete."""
    if version in _OFFLINE:
        pytest.skip(_OFFLINE[version])
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (apt-get install bubblewrap): the roots are entered with it")
    toolchain = load_toolchain()
    dest = ARTIFACTS / version
    try:
        return Path(toolchain.ensure_tree(version, dest, ARTIFACTS / "debs"))
    except toolchain.ToolchainError as exc:
        if not archive_reachable():
            _OFFLINE[version] = f"no ROCm {version} root in {dest} and Debian's archive is unreachable"
            pytest.skip(_OFFLINE[version])
        pytest.fail(str(exc))


def _wanted(rel: str) -> bool:
    cuda = "src/ggml-cuda/"
    if rel.startswith("include/") or (rel.startswith("src/") and rel.count("/") == 1 and rel.endswith(".h")):
        return True
    return rel.startswith(cuda) and (
        rel.endswith(".cuh") or "/vendors/" in rel or rel[len(cuda) :] in SOURCES
    )


def ggml_tree(sdist: Path) -> Path:
    """test-artifacts/rocm/ggml-<sha>: the part of the sdist's ggml tree the compiles read."""
    return extract_ggml(sdist, ARTIFACTS, _wanted)


def command(version: str, target: str, ggml: Path) -> list[str]:
    """The root's clang++ for one ggml-hip source, less the source and -o (run inside the root)."""
    includes = [f"-I{ggml / 'src'}", f"-I{ggml / 'include'}"]
    clang = f"/usr/lib/llvm-{LLVM[version]}/bin/clang++"
    arch = f"--offload-arch={target}"
    return [clang, *DEFINES, *fa_defines(), *includes, *FLAGS, *REMARKS, arch, "-x", "hip", "-c"]


def in_root(root: Path, binds: list[Path], argv: list[str]) -> list[str]:
    """argv run inside `root` through the example's enter-root.sh, `binds` writable."""
    flags = [arg for path in binds for arg in ("--bind", str(path))]
    return [str(EXAMPLE / "enter-root.sh"), str(root), *flags, "--", *argv]


def compile_all(ggml: Path, roots: dict[str, Path]) -> dict[tuple[str, str, str], Build]:
    """Every (source, target) of JOBS by every root, on all cores unless cached."""
    builds: dict[tuple[str, str, str], Build] = {}
    todo: list[tuple[list[str], Build]] = []
    out_root = ARTIFACTS / "ggml-out"
    out_root.mkdir(parents=True, exist_ok=True)
    for source, target in JOBS:
        for version, root in roots.items():
            path = ggml / "src" / "ggml-cuda" / source
            argv = command(version, target, ggml)
            flags = "\0".join(argv).replace(str(ggml), "GGML")
            key = hashlib.sha256(f"{SDIST_SHA256}\0{source}\0{flags}".encode()).hexdigest()[:16]
            obj = out_root / version / target / f"{path.stem}-{key}.o"
            build = Build(version, target, path, obj)
            builds[(version, target, source)] = build
            if not (obj.is_file() and build.log.is_file()):
                todo.append((in_root(root, [ggml, out_root], [*argv, str(path)]), build))
    # The longest first, so that two cores finish together.
    todo.sort(key=lambda job: (job[1].target != TARGET, "mmq" in job[1].stem))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        failures = [f for f in pool.map(lambda job: _compile(*job), todo) if f]
    if failures:
        pytest.fail("\n\n".join(failures))
    return builds


def _compile(argv: list[str], build: Build) -> str | None:
    """Compile to a temporary name and rename it when clang succeeds; else the error."""
    build.obj.parent.mkdir(parents=True, exist_ok=True)
    part = build.obj.with_name(f".{build.obj.name}.{os.getpid()}")
    proc = subprocess.run([*argv, "-o", str(part)], capture_output=True, text=True, check=False)
    if proc.returncode or not part.is_file():
        part.unlink(missing_ok=True)
        return f"ROCm {build.version} ({build.target}): {' '.join(argv)} failed:\n{proc.stderr[-4000:]}"
    log = build.log.with_name(f".{build.log.name}.{os.getpid()}")
    log.write_text(proc.stderr)
    part.rename(build.obj)
    log.rename(build.log)
    return None


Builds = dict[tuple[str, str, str], Build]


def both_roots() -> dict[str, Path]:
    """The pinned and the candidate root, made side by side: unpacking is one core's work each."""
    toolchain = load_toolchain()
    versions = (toolchain.PINNED, toolchain.CANDIDATE)
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(versions, pool.map(root_tree, versions), strict=True))


def slice_builds(roots: dict[str, Path]) -> Builds:
    """Every (source, target) of JOBS by both roots, compiled or taken from the cache."""
    sdist = sdist_path()
    if sdist is None:
        pytest.skip("the llama-cpp-python 0.3.36 sdist is not in the nix store (`make example` adds it)")
    return compile_all(ggml_tree(sdist), roots)


def role_tree(root: Path, version: str, builds: Builds) -> Path:
    """An out-path-like tree of one toolchain's objects: lib/<stem>-<target>.o."""
    (root / "lib").mkdir(parents=True)
    for (v, _, _), build in sorted(builds.items()):
        if v == version:
            (root / "lib" / f"{build.stem}-{build.target}.o").write_bytes(build.obj.read_bytes())
    return root
