"""Each CUDA kernel tied to the translation unit nvcc compiled it from, on nvcc's own output.

tests/compile/kernels/cuda's two translation units, compiled here by nvcc (on PATH, else the
pinned toolchain's, `cuda_wheels.find_nvcc`) to objects, then linked into a shared library, an
executable and an archive; relocatable (`-rdc`) builds, whose device code nvcc links into one
blob, and a stripped library cannot name a source and say why. The expected side is the build:
each object is one unit, named after the `.cu` source it was compiled from: nvcc names the
`.cudafe1.cpp` intermediate, which the object's FILE symbol (as readelf lists it) holds behind a
temporary prefix, after that source's stem.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cuda_wheels import find_nvcc

from qualify.compile.nvfatbin import iter_cubins
from qualify.compile.scan import scan

SOURCES = Path(__file__).parent / "kernels" / "cuda"
TOOLS = ["readelf", "objcopy"]
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} (binutils)")
NVCC = ["-O3", "-arch=sm_90", "-Xcompiler", "-fPIC"]
UNITS = ("tu_one", "tu_two")


class Builds:
    """nvcc's outputs, each made once, on first use."""

    def __init__(self, root: Path) -> None:
        self.root, self.nvcc, self.made = root, find_nvcc(), set[str]()

    def get(self, name: str) -> Path:
        out = self.root / name
        if name not in self.made:
            self._make(name, out)
            self.made.add(name)
        return out

    def _make(self, name: str, out: Path) -> None:
        rdc = ["-rdc=true"] if "rdc" in name else []
        objects = (
            [] if name.endswith(".o") else [str(self.get(f"{u}{'_rdc' if rdc else ''}.o")) for u in UNITS]
        )
        if name == "two_tu_stripped.so":
            argv = ["objcopy", "--strip-all", str(self.get("two_tu.so")), str(out)]
        elif name.endswith(".o"):
            unit = name.removesuffix(".o").removesuffix("_rdc")
            argv = [self.nvcc, *NVCC, *rdc, "-c", str(SOURCES / f"{unit}.cu"), "-o", str(out)]
        elif name.endswith(".so"):
            argv = [self.nvcc, *NVCC, "-shared", *objects, "-o", str(out)]
        elif name.endswith(".exe"):
            argv = [self.nvcc, *NVCC, *rdc, *objects, "-o", str(out)]  # tu_two holds main
        else:
            argv = [self.nvcc, "-lib", *objects, "-o", str(out)]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stderr}"


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    return Builds(tmp_path_factory.mktemp("cuda_sources"))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def own(builds: Builds) -> set[tuple[str, str]]:
    """(source, cubin digest) of each unit's own object, named by the source it was compiled from."""
    return {
        (f"{unit}.cu", sha(b.data))
        for unit in UNITS
        for b in iter_cubins(builds.get(f"{unit}.o").read_bytes(), unit)
    }


def test_objects_and_a_linked_library_name_each_kernels_unit(builds: Builds) -> None:
    for unit in UNITS:
        symbols = subprocess.run(
            ["readelf", "-sW", builds.get(f"{unit}.o")], capture_output=True, text=True
        ).stdout
        [written] = re.findall(r"\bFILE\s+LOCAL\s+DEFAULT\s+ABS\s+(\S+)", symbols)
        assert re.fullmatch(rf"tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_{unit}\.cudafe1\.cpp", written), written
    expected = own(builds)
    library = builds.get("two_tu.so")
    # Each unit's cubins, byte for byte, under its name; nvcc's device-link stub holds no kernel.
    tied = {(b.source_file, sha(b.data)) for b in iter_cubins(library.read_bytes(), "so") if b.source_file}
    assert tied == expected
    found = scan(library, host_patterns=())
    table = found.tables["cuda"]
    by_unit = {s: set(rows["name"]) for s, rows in table.groupby("source_file")}
    assert by_unit == {
        f"{unit}.cu": set(scan(builds.get(f"{unit}.o"), host_patterns=()).tables["cuda"]["name"])
        for unit in UNITS
    }
    assert table["source_file"].notna().all() and "no_source_file" not in found.files[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["two_tu.exe", "two_tu.a"])
def test_an_executable_and_an_archive_name_each_kernels_unit(builds: Builds, name: str) -> None:
    blobs = [b for b in iter_cubins(builds.get(name).read_bytes(), name) if b.source_note is None]
    assert {(b.source_file, sha(b.data)) for b in blobs} == own(builds)


@pytest.mark.slow
def test_relocatable_and_stripped_builds_name_no_unit_and_say_why(builds: Builds) -> None:
    def notes(name: str) -> set[tuple[str | None, str | None]]:
        return {(b.source_file, b.source_note) for b in iter_cubins(builds.get(name).read_bytes(), name)}

    assert notes("two_tu_stripped.so") == {(None, "stripped: no .symtab")}
    # -rdc: the objects' relocatable images, and the one blob nvcc's device link makes of them.
    assert notes("tu_one_rdc.o") == {
        (None, "-rdc: relocatable device code (__nv_relfatbin) is not tied to source files")
    }
    assert notes("two_tu_rdc.exe") == {
        (None, "-rdc: the device link (link.stub) holds several sources' code")
    }
    found = scan(builds.get("two_tu_rdc.exe"), host_patterns=())
    assert found.tables["cuda"]["source_file"].isna().all() and len(found.tables["cuda"]) > 0
    assert found.files[0]["no_source_file"] == "-rdc: the device link (link.stub) holds several sources' code"


@pytest.mark.parametrize(
    ("written", "named"),
    [
        ("tmpxft_00001d1d_00000000-6_fattn-tile-instance-dkq80.cudafe1.cpp", "fattn-tile-instance-dkq80.cu"),
        ("tmpxft_0a_00000001-7_mmq.cudafe1.cpp", "mmq.cu"),
        # Not nvcc's intermediate: kept as written.
        ("mmq.cudafe1.cpp", "mmq.cudafe1.cpp"),
        ("kernels.cu", "kernels.cu"),
    ],
)
def test_nvcc_s_intermediate_names_the_source_it_was_made_from(written: str, named: str) -> None:
    from qualify.compile.sourcefiles import CUDA, HIP

    assert CUDA.unit(written) == named
    assert HIP.unit(written) == written  # clang writes the source's own name
