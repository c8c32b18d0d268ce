"""Each AMDGPU kernel of ggml's real objects tied to its translation unit: the objects ROCm 6.4.3
and 7.2.4 compiled from llama.cpp's sources (tests/compile/ggml_rocm.py), and a shared library
the ROCm 7.2.4 root's own clang++ and lld link from the three gfx1151 objects, as llama.cpp's
libggml-hip.so is linked. The expected side is the compile itself: each object is one source,
and the library holds, under each source's name, the kernels that source's object holds.
"""

from __future__ import annotations

import io
import subprocess
import time
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from ggml_rocm import ARTIFACTS, LLVM, TARGET, Builds, both_roots, in_root, load_toolchain, slice_builds

from qualify.compile.amdgpu import iter_kernels
from qualify.compile.offloadbundle import iter_code_objects
from qualify.compile.scan import scan
from qualify.compile.sourcefiles import source_files

pytestmark = pytest.mark.slow
CANDIDATE = load_toolchain().CANDIDATE


@pytest.fixture(scope="module")
def roots() -> dict[str, Path]:
    return both_roots()


@pytest.fixture(scope="module")
def builds(roots: dict[str, Path]) -> Builds:
    return slice_builds(roots)


def root_tool(roots: dict[str, Path], work: list[Path], name: str, *args: str) -> None:
    """One of the candidate root's LLVM tools, run inside the root (`work` writable)."""
    tool = f"/usr/lib/llvm-{LLVM[CANDIDATE]}/bin/{name}"
    argv = in_root(roots[CANDIDATE], [*work, ARTIFACTS], [tool, *args])
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def library(roots: dict[str, Path], builds: Builds, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libggml-slice.so: the candidate's gfx1151 objects linked by its clang++ with lld, the
    ggml symbols the slice does not define left to the loader."""
    work = tmp_path_factory.mktemp("linked")
    objects = [str(b.obj) for (v, t, _), b in sorted(builds.items()) if v == CANDIDATE and t == TARGET]
    out = work / "libggml-slice.so"
    link = ("-shared", "-fuse-ld=lld", "-Wl,--unresolved-symbols=ignore-all", "-o", str(out))
    root_tool(roots, [work], "clang++", *link, *objects)
    return out


def test_every_objects_kernels_name_its_source(builds: Builds) -> None:
    for (version, target, source), build in sorted(builds.items()):
        data = build.obj.read_bytes()
        # The compile's source, as clang names it: the basename (ggml compiles them by full path).
        assert source_files(ELFFile(io.BytesIO(data)), data).names == {0: build.source.name}
        blobs = list(iter_code_objects(data, build.obj.name))
        assert blobs and {(b.source_file, b.source_note) for b in blobs} == {(build.source.name, None)}, (
            version,
            target,
            source,
        )


def test_a_linked_library_ties_every_kernel_to_its_objects_source(builds: Builds, library: Path) -> None:
    started = time.monotonic()
    found = scan(library, host_patterns=())
    seconds = time.monotonic() - started
    table = found.tables["amdgpu"]
    assert not found.unreadable and table["source_file"].notna().all()
    linked = {s: set(rows["name"]) for s, rows in table.groupby("source_file")}
    own = {
        build.source.name: {k.name for _, k in iter_kernels(build.obj.read_bytes(), build.obj.name)}
        for (v, t, _), build in builds.items()
        if v == CANDIDATE and t == TARGET
    }
    assert linked == own and len(own) == 3
    assert len(table) == sum(map(len, own.values())) > 400
    assert "no_source_file" not in found.files[0]
    print(f"scanned {library.name} ({library.stat().st_size} bytes, {len(table)} kernels) in {seconds:.2f} s")


def test_a_stripped_library_names_no_source_and_says_why(
    roots: dict[str, Path], library: Path, tmp_path: Path
) -> None:
    stripped = tmp_path / "libggml-stripped.so"
    root_tool(roots, [tmp_path, library.parent], "llvm-strip", "-o", str(stripped), str(library))
    found = scan(stripped, host_patterns=())
    table = found.tables["amdgpu"]
    assert len(table) > 400 and table["source_file"].isna().all()
    assert found.files[0]["no_source_file"] == "stripped: no .symtab"
