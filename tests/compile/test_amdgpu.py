"""The AMDGPU readers against real artifacts, figure by figure against LLVM's own tools.

Every artifact is built here with clang-19 from tests/kernels (header-less: -nogpulib,
-nogpuinc). The expected side is always an LLVM tool on the same
files: clang-offload-bundler-19 / clang-offload-packager-19 extract the code objects and
llvm-readelf-19 prints their metadata. No resource figure is written into this file.
"""

from __future__ import annotations

import hashlib
import random
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest
import zstandard

from qualify.compile.amdgpu import AmdKernel, CodeObjectError, base_name, iter_kernels, read_code_object
from qualify.compile.offloadbundle import iter_code_objects
from qualify.compile.scan import scan

KERNELS = Path(__file__).parent / "kernels"
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
BUNDLER, READELF = "clang-offload-bundler-19", "llvm-readelf-19"
TOOLS = ["clang-19", "clang++-19", BUNDLER, "clang-offload-packager-19", READELF, "llvm-objcopy-19"]
TOOLS += ["llvm-objdump-19", "llvm-ar-19", "ld.lld-19"]
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"needs {', '.join(MISSING)} (apt-get install clang-19 lld-19 llvm-19 clang-tools-19)",
)
NO_CLANG15 = pytest.mark.skipif(shutil.which("clang-15") is None, reason="clang-15 is not installed")

CL = ["-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa", "-O3", "-nogpulib"]
HIP = ["-x", "hip", "--offload-arch=gfx1100", "--offload-arch=gfx1151", "-nogpulib", "-nogpuinc", "-O3"]
HIP += ["-fPIC"]
COV_BY_ABIVERSION = {1: 3, 2: 4, 3: 5, 4: 6}  # the spec's mapping; the byte itself comes from readelf


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Artifacts:
    """Builds each artifact once, on first use, in one temporary directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[str, Path] = {}

    def run(self, *args: str | Path, cwd: Path | None = None) -> str:
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd)
        if proc.returncode:
            pytest.fail(f"{' '.join(map(str, args))} failed:\n{proc.stderr}")
        return proc.stdout

    def get(self, name: str) -> Path:
        if name not in self.built:
            path = self.root / name
            RECIPES[name](self, path)
            self.built[name] = path
        return self.built[name]

    # --- the tools' view -------------------------------------------------------------------

    def tool_code_objects(self, path: Path) -> list[tuple[str | None, Path]]:
        """The code objects LLVM's tools find in `path`: (bundle id or None, extracted file)."""
        data = path.read_bytes()
        if data.startswith(b"\x7fELF") and struct.unpack_from("<H", data, 18)[0] == 224:
            return [(None, path)]
        if data.startswith(b"!<arch>\n"):
            outdir = self.root / f"{path.name}.members"
            outdir.mkdir(exist_ok=True)
            self.run("llvm-ar-19", "x", path.resolve(), cwd=outdir)
            members = self.run("llvm-ar-19", "t", path).split()
            return [found for member in members for found in self.tool_code_objects(outdir / member)]
        if not data.startswith(b"\x7fELF"):
            return self.unbundle(path)
        sections = re.findall(r"\]\s+(\S+)\s", self.run(READELF, "-S", "-W", path))
        found: list[tuple[str | None, Path]] = []
        if ".hip_fatbin" in sections:
            dumped = path.with_name(path.name + ".hip_fatbin")
            self.run("llvm-objcopy-19", f"--dump-section=.hip_fatbin={dumped}", path, f"{dumped}.copy")
            for offset, blob in fatbin_slices(dumped.read_bytes()):
                piece = path.with_name(f"{path.name}.fatbin@{offset:x}")
                piece.write_bytes(blob)
                found += self.unbundle(piece)
        if any(s.startswith(BUNDLE_MAGIC.decode()) for s in sections):
            found += self.unbundle(path)
        if ".llvm.offloading" in sections:
            listing = self.run("llvm-objdump-19", "--offloading", path)
            for kind, arch in re.findall(r"kind\s+(.+?)\narch\s+(\S+)", listing):
                if kind == "elf":
                    out = path.with_name(f"{path.name}.{arch}.image")
                    self.run("clang-offload-packager-19", path, f"--image=file={out},arch={arch}")
                    found.append((None, out))
        return found

    def unbundle(self, path: Path) -> list[tuple[str | None, Path]]:
        """clang-offload-bundler's entries of a bundle, CCOB or object; ELF payloads only."""
        found: list[tuple[str | None, Path]] = []
        for bundle_id in self.run(BUNDLER, "--list", "--type=o", f"--input={path}").split():
            if bundle_id.startswith("host-"):  # the empty host entry, which the bundler refuses to extract
                continue
            out = path.with_name(f"{path.name}.{bundle_id.replace(':', '_')}")
            self.run(
                BUNDLER,
                "--unbundle",
                "--type=o",
                f"--input={path}",
                f"--targets={bundle_id}",
                f"--output={out}",
            )
            if out.read_bytes().startswith(b"\x7fELF"):
                found.append((bundle_id, out))
        return found


def fatbin_slices(section: bytes) -> list[tuple[int, bytes]]:
    """Blobs at 4096-aligned offsets of a .hip_fatbin section, cut for the bundler.

    clang-offload-bundler-19 decompresses a V2 CCOB up to the end of its input rather than to
    its size field, so a CCOB is cut at that field; a plain bundle tolerates trailing padding.
    """
    starts = [o for o in range(0, len(section), 4096) if section.startswith((BUNDLE_MAGIC, b"CCOB"), o)]
    slices = []
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(section)
        if section.startswith(b"CCOB", start):
            version = struct.unpack_from("<H", section, start + 4)[0]
            end = start + struct.unpack_from("<I" if version == 2 else "<Q", section, start + 8)[0]
        slices.append((start, section[start:end]))
    return slices


def readelf_metadata(path: Path) -> tuple[int, str, list[dict[str, str]]]:
    """(EI_ABIVERSION, amdhsa.target, per-kernel scalar keys) as llvm-readelf-19 prints them."""
    out = subprocess.run(
        [READELF, "-h", "--notes", str(path)], capture_output=True, text=True, check=True
    ).stdout
    abiversion = int(re.search(r"ABI Version:\s+(\d+)", out).group(1))
    target = re.search(r"^amdhsa\.target:\s+(\S+)", out, re.M).group(1).strip("'")
    kernels: list[dict[str, str]] = []
    listed: str | None = None  # a kernel-level key whose value is a YAML list on the next lines
    for line in out.splitlines():
        # Kernel-level keys sit at indent 4 ("  - .key" opens the next kernel); .args are deeper.
        match = re.match(r"^  (- |  )(\.[a-z0-9_]+):\s*(.*)$", line)
        item = re.match(r"^      - (\d+)$", line)
        if listed and item:
            kernels[-1][listed] = f"{kernels[-1].get(listed, '')} {item.group(1)}".strip()
            continue
        listed = None
        if match is None:
            continue
        if match.group(1) == "- ":
            kernels.append({})
        if match.group(3):
            kernels[-1][match.group(2)] = match.group(3).strip().strip("'")
        else:
            listed = match.group(2)
    return abiversion, target, kernels


METADATA_FIELDS = [
    f.name
    for f in fields(AmdKernel)
    if f.name not in ("target", "code_object_version") and not f.name.startswith("descriptor_")
]
ALWAYS_PRINTED = {".name", ".symbol", ".vgpr_count", ".sgpr_count", ".vgpr_spill_count", ".sgpr_spill_count"}
ALWAYS_PRINTED |= {".private_segment_fixed_size", ".group_segment_fixed_size", ".wavefront_size"}


def assert_matches_readelf(kernels: list[AmdKernel], path: Path) -> None:
    abiversion, target, expected = readelf_metadata(path)
    assert [k.name for k in kernels] == [e[".name"] for e in expected]
    for kernel, tool in zip(kernels, expected, strict=True):
        assert kernel.target == target
        assert kernel.code_object_version == COV_BY_ABIVERSION[abiversion]
        assert tool.keys() >= ALWAYS_PRINTED
        for name in METADATA_FIELDS:
            mine, key = getattr(kernel, name), f".{name}"
            if mine is None:
                assert key not in tool, f"{kernel.name}: readelf shows {key} but the reader has None"
            else:
                # readelf prints .workgroup_processor_mode as 0/1 and other flags as false/true.
                if name == "workgroup_processor_mode":
                    shown = str(int(mine))
                elif isinstance(mine, tuple):
                    shown = " ".join(map(str, mine))
                else:
                    shown = str(mine).lower() if isinstance(mine, bool) else str(mine)
                assert shown == tool[key], f"{kernel.name} {key}: reader {shown}, readelf {tool[key]}"
        assert kernel.descriptor_consistent, kernel.descriptor_mismatches()


# --- recipes ---------------------------------------------------------------------------------


def _cl(mcpu: str, *extra: str, compiler: str = "clang-19") -> Callable[[Artifacts, Path], None]:
    return lambda a, out: a.run(compiler, *CL, f"-mcpu={mcpu}", *extra, KERNELS / "resources.cl", "-o", out)


def _hip_obj(tu: str, *extra: str) -> Callable[[Artifacts, Path], None]:
    return lambda a, out: a.run("clang++-19", *HIP, *extra, "-c", KERNELS / f"{tu}.hip", "-o", out)


def _link(*inputs: str, extra: tuple[str, ...] = ()) -> Callable[[Artifacts, Path], None]:
    # Linked with the C++ driver: the HIP driver would add -lamdhip64, which is not installed.
    return lambda a, out: a.run("clang++-19", *extra, *(a.get(i) for i in inputs), "-o", out)


def _main_o(a: Artifacts, out: Path) -> None:
    source = a.root / "main.cpp"
    source.write_text("int main() { return 0; }\n")
    a.run("clang++-19", "-c", source, "-o", out)


def _offloading(a: Artifacts, out: Path) -> None:
    # The packager infers the image kind from the extension: ".o" is an object, ".bc" bitcode.
    images = []
    for arch in ("gfx1100", "gfx1151"):
        image = a.root / f"image_{arch}.o"
        image.write_bytes(a.get(f"cl_{arch}.hsaco").read_bytes())
        images.append(f"--image=file={image},triple=amdgcn-amd-amdhsa,arch={arch},kind=hip")
    bitcode = a.root / "image_gfx1030.bc"
    a.run("clang-19", *CL, "-mcpu=gfx1030", "-emit-llvm", "-c", KERNELS / "resources.cl", "-o", bitcode)
    images.append(f"--image=file={bitcode},triple=amdgcn-amd-amdhsa,arch=gfx1030,kind=hip")
    package = a.root / "package.bin"
    a.run("clang-offload-packager-19", "-o", package, *images)
    a.get("main.o")  # writes main.cpp
    a.run("clang++-19", "-c", a.root / "main.cpp", "-Xclang", f"-fembed-offload-object={package}", "-o", out)


RECIPES: dict[str, Callable[[Artifacts, Path], None]] = {
    "cl_gfx1100.hsaco": _cl("gfx1100"),
    "cl_gfx1151.hsaco": _cl("gfx1151"),
    "cl_gfx1100_wave64.hsaco": _cl("gfx1100", "-mwavefrontsize64"),
    "cl_gfx90a.hsaco": _cl("gfx90a"),
    "cl_gfx942.hsaco": _cl("gfx942"),
    "cl_gfx1100_cov4.hsaco": _cl("gfx1100", "-mcode-object-version=4"),
    "cl_gfx11_generic_cov6.hsaco": _cl("gfx11-generic", "-mcode-object-version=6"),
    "cl_gfx1100_clang15.hsaco": _cl("gfx1100", compiler="clang-15"),
    "hip_device.hipfb": _hip_obj("tu_one", "--offload-device-only"),
    "hip_device_two.hipfb": _hip_obj("tu_two", "--offload-device-only"),
    "hip_device_ccob.hipfb": _hip_obj("tu_one", "--offload-device-only", "--offload-compress"),
    "tu_one.o": _hip_obj("tu_one"),
    "tu_two.o": _hip_obj("tu_two"),
    "tu_one_ccob.o": _hip_obj("tu_one", "--offload-compress"),
    "tu_two_ccob.o": _hip_obj("tu_two", "--offload-compress"),
    "rdc_olddriver.o": _hip_obj("tu_one", "-fgpu-rdc"),
    "rdc_two_olddriver.o": _hip_obj("tu_two", "-fgpu-rdc"),
    "rdc_newdriver.o": _hip_obj("tu_one", "-fgpu-rdc", "--offload-new-driver"),
    "main.o": _main_o,
    "two_tu.so": _link("tu_one.o", "tu_two.o", extra=("-shared",)),
    "two_tu_lld.so": _link("tu_one.o", "tu_two.o", extra=("-shared", "-fuse-ld=lld")),
    "two_tu_ccob.so": _link("tu_one_ccob.o", "tu_two_ccob.o", extra=("-shared",)),
    "two_tu.exe": _link("tu_one.o", "tu_two.o", "main.o", extra=("-Wl,--unresolved-symbols=ignore-all",)),
    "two_tu.a": lambda a, out: a.run("llvm-ar-19", "rcs", out, a.get("tu_one.o"), a.get("tu_two.o")),
    # One object from two, as `ld -r` makes it: both units' wrappers and FILE symbols kept.
    "two_tu_r.o": lambda a, out: a.run("ld.lld-19", "-r", a.get("tu_one.o"), a.get("tu_two.o"), "-o", out),
    # The wrapper pointers as packed relative relocations (SHT_RELR): the address is in place.
    "two_tu_relr.so": _link(
        "tu_one.o", "tu_two.o", extra=("-shared", "-fuse-ld=lld", "-Wl,-z,pack-relative-relocs")
    ),
    "two_tu_stripped.so": lambda a, out: a.run("llvm-objcopy-19", "--strip-all", a.get("two_tu_lld.so"), out),
    "two_tu_discarded.so": _link(
        "tu_one.o", "tu_two.o", extra=("-shared", "-fuse-ld=lld", "-Wl,--discard-all")
    ),
    # -fgpu-rdc links the device code once (with lld) into one code object per target.
    "rdc.so": lambda a, out: a.run(
        "clang++-19",
        "-fgpu-rdc",
        "--hip-link",
        "-no-hip-rt",
        "--offload-arch=gfx1100",
        "--offload-arch=gfx1151",
        "-shared",
        a.get("rdc_olddriver.o"),
        a.get("rdc_two_olddriver.o"),
        "-o",
        out,
    ),
    "offloading.o": _offloading,
}

ARTIFACTS = [
    "cl_gfx1100.hsaco",
    "cl_gfx1151.hsaco",
    "cl_gfx1100_wave64.hsaco",
    "cl_gfx90a.hsaco",
    "cl_gfx942.hsaco",
    "cl_gfx1100_cov4.hsaco",
    "cl_gfx11_generic_cov6.hsaco",
    pytest.param("cl_gfx1100_clang15.hsaco", marks=NO_CLANG15),
    "hip_device.hipfb",
    "hip_device_ccob.hipfb",
    "tu_one.o",
    "tu_one_ccob.o",
    "two_tu.so",
    "two_tu_lld.so",
    "two_tu_ccob.so",
    "two_tu.exe",
    "two_tu.a",
    "rdc.so",
    "rdc_olddriver.o",
    "rdc_newdriver.o",
    "offloading.o",
]
BITCODE_ONLY = {"rdc_olddriver.o", "rdc_newdriver.o"}
FAT = ["tu_one.o", "tu_one_ccob.o", "hip_device.hipfb", "hip_device_ccob.hipfb", "two_tu.so", "two_tu_lld.so"]
FAT += ["two_tu_ccob.so", "two_tu.exe", "two_tu.a", "rdc.so"]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    return Artifacts(tmp_path_factory.mktemp("amdgpu"))


# --- the reader agrees with the tools ---------------------------------------------------------


@pytest.mark.parametrize("name", ARTIFACTS)
def test_every_code_object_and_figure_matches_the_llvm_tools(artifacts: Artifacts, name: str) -> None:
    path = artifacts.get(name)
    expected = artifacts.tool_code_objects(path)
    assert bool(expected) == (name not in BITCODE_ONLY)
    blobs = list(iter_code_objects(path.read_bytes(), name))
    assert sorted((b.bundle_id, sha(b.data)) for b in blobs) == sorted(
        (bundle_id, sha(file.read_bytes())) for bundle_id, file in expected
    )
    tool_file = {sha(file.read_bytes()): file for _, file in expected}
    for blob in blobs:
        assert blob.source.startswith(name)
        assert_matches_readelf(read_code_object(blob.data, blob.source), tool_file[sha(blob.data)])


@pytest.mark.parametrize(
    "name",
    ["cl_gfx1100.hsaco", "cl_gfx1151.hsaco", pytest.param("cl_gfx1100_clang15.hsaco", marks=NO_CLANG15)],
)
def test_the_spilling_kernel_spills_as_readelf_shows(artifacts: Artifacts, name: str) -> None:
    path = artifacts.get(name)
    (tool,) = [k for k in readelf_metadata(path)[2] if k[".name"] == "acc_spill"]
    assert int(tool[".vgpr_spill_count"]) > 0 or int(tool[".private_segment_fixed_size"]) > 0
    (kernel,) = [k for k in read_code_object(path.read_bytes(), name) if k.name == "acc_spill"]
    assert kernel.vgpr_spill_count == int(tool[".vgpr_spill_count"])
    assert kernel.private_segment_fixed_size == int(tool[".private_segment_fixed_size"])


@pytest.mark.parametrize("name", FAT)
def test_fat_binaries_hold_both_targets(artifacts: Artifacts, name: str) -> None:
    kernels = [k for _, k in iter_kernels(artifacts.get(name).read_bytes(), name)]
    by_target = {
        p: sorted(base_name(k.name) for k in kernels if k.processor == p) for p in ("gfx1100", "gfx1151")
    }
    assert by_target["gfx1100"] == by_target["gfx1151"] != []
    assert {k.processor for k in kernels} == {"gfx1100", "gfx1151"}
    assert all(k.descriptor_consistent for k in kernels)


def test_two_translation_units_are_two_blobs_in_the_section(artifacts: Artifacts) -> None:
    for name in ("two_tu.so", "two_tu_lld.so", "two_tu_ccob.so", "two_tu.exe"):
        blobs = list(iter_code_objects(artifacts.get(name).read_bytes(), name))
        offsets = {re.search(r"\.hip_fatbin (@0x[0-9a-f]+)", b.source).group(1) for b in blobs}
        assert len(offsets) == 2, (name, offsets)
    archive = artifacts.get("two_tu.a").read_bytes()
    members = {b.source.split(" section")[0] for b in iter_code_objects(archive, "a")}
    assert members == {"a member tu_one.o", "a member tu_two.o"}


def test_descriptor_granule_follows_wave_size_and_gfx90a(artifacts: Artifacts) -> None:
    wave64 = read_code_object(artifacts.get("cl_gfx1100_wave64.hsaco").read_bytes(), "w64")
    assert {(k.wavefront_size, k.descriptor_wave32, k.vgpr_granule) for k in wave64} == {(64, False, 4)}
    gfx90a = read_code_object(artifacts.get("cl_gfx90a.hsaco").read_bytes(), "90a")
    assert {(k.wavefront_size, k.descriptor_wave32, k.vgpr_granule) for k in gfx90a} == {(64, False, 8)}
    assert all(k.agpr_count is not None and k.descriptor_consistent for k in gfx90a)
    wave32 = read_code_object(artifacts.get("cl_gfx1100.hsaco").read_bytes(), "w32")
    assert {(k.wavefront_size, k.descriptor_wave32, k.vgpr_granule) for k in wave32} == {(32, True, 8)}


def test_rdc_intern_suffix_is_stripped_by_base_name(artifacts: Artifacts) -> None:
    rdc = [k.name for _, k in iter_kernels(artifacts.get("rdc.so").read_bytes(), "rdc")]
    plain = [k.name for _, k in iter_kernels(artifacts.get("two_tu.so").read_bytes(), "plain")]
    assert any(".intern." in n for n in rdc)  # the names themselves were checked against readelf
    assert sorted(base_name(n) for n in rdc) == sorted(plain)
    assert (
        base_name("_ZN12_GLOBAL__N_16hiddenEPf.intern.4ce2bead0ca16334.kd") == "_ZN12_GLOBAL__N_16hiddenEPf"
    )
    assert base_name("vadd.kd") == "vadd"
    assert base_name("internal.kernel") == "internal.kernel"


def test_bitcode_only_objects_hold_no_code_objects(artifacts: Artifacts) -> None:
    old = artifacts.get("rdc_olddriver.o")
    ids = artifacts.run(BUNDLER, "--list", "--type=o", f"--input={old}").split()
    assert any(i.startswith("hip-amdgcn") for i in ids)  # the tool sees entries: bitcode
    assert list(iter_code_objects(old.read_bytes(), "old")) == []
    new = artifacts.get("rdc_newdriver.o")
    kinds = re.findall(r"kind\s+(.+)", artifacts.run("llvm-objdump-19", "--offloading", new))
    assert kinds and set(kinds) == {"llvm ir"}
    assert list(iter_code_objects(new.read_bytes(), "new")) == []


# --- compressed bundles ------------------------------------------------------------------------


def ccob(bundle: bytes, version: int, method: int) -> bytes:
    """A compressed offload bundle (CCOB); the bundler-19 round trip below confirms v1/v2."""
    body = zlib.compress(bundle, 9) if method == 0 else zstandard.ZstdCompressor(level=19).compress(bundle)
    digest = struct.unpack("<Q", hashlib.md5(bundle).digest()[:8])[0]
    if version == 1:
        return b"CCOB" + struct.pack("<HHIQ", 1, method, len(bundle), digest) + body
    if version == 2:
        return b"CCOB" + struct.pack("<HHIIQ", 2, method, 24 + len(body), len(bundle), digest) + body
    return b"CCOB" + struct.pack("<HHQQQ", 3, method, 32 + len(body), len(bundle), digest) + body


@pytest.mark.parametrize(("version", "method"), [(v, m) for v in (1, 2, 3) for m in (0, 1)])
def test_ccob_versions_and_methods(artifacts: Artifacts, tmp_path: Path, version: int, method: int) -> None:
    bundle = artifacts.get("hip_device.hipfb").read_bytes()
    plain = sorted((b.bundle_id, sha(b.data)) for b in iter_code_objects(bundle))
    packed = ccob(bundle, version, method)
    blobs = list(iter_code_objects(packed, "packed"))
    assert sorted((b.bundle_id, sha(b.data)) for b in blobs) == plain
    assert all(f"CCOB v{version} {('zlib', 'zstd')[method]}" in b.source for b in blobs)
    if version < 3:  # clang-offload-bundler-19 predates V3
        path = tmp_path / "packed.hipfb"
        path.write_bytes(packed)
        assert sorted((i, sha(f.read_bytes())) for i, f in artifacts.unbundle(path)) == plain


def test_v1_ccobs_in_a_section_are_delimited_by_their_stream(artifacts: Artifacts) -> None:
    one, two = (artifacts.get(n).read_bytes() for n in ("hip_device.hipfb", "hip_device_two.hipfb"))
    first = ccob(one, 1, 1)
    section = first + bytes(-len(first) % 4096) + ccob(two, 1, 0)
    names = {k.name for _, k in iter_kernels(section, "section")}
    expected = {k.name for _, k in iter_kernels(one + bytes(-len(one) % 4096) + two, "plain")}
    assert names == expected
    assert "second" in names and "scale" in names


def test_corrupt_ccob_hash_names_the_offset(artifacts: Artifacts) -> None:
    data = bytearray(artifacts.get("hip_device_ccob.hipfb").read_bytes())
    assert data.startswith(b"CCOB")
    data[16] ^= 0xFF  # first byte of the hash in V1/V2
    with pytest.raises(CodeObjectError, match=r"hipfb @0x0: CCOB v\d \w+ hash mismatch"):
        list(iter_code_objects(bytes(data), "hipfb"))
    # The second translation unit's blob inside a shared library: the offset in the section.
    path = artifacts.get("two_tu_ccob.so")
    dumped = path.with_name(path.name + ".hip_fatbin")
    artifacts.tool_code_objects(path)  # dumps the section
    section = dumped.read_bytes()
    (_, _), (second, _) = fatbin_slices(section)
    data = bytearray(path.read_bytes())
    file_offset = data.find(section)
    data[file_offset + second + 16] ^= 0xFF
    with pytest.raises(ValueError, match=rf"section \.hip_fatbin @0x{second:x}: .*hash mismatch"):
        list(iter_code_objects(bytes(data), "lib"))


def test_unknown_ccob_version_method_and_truncation_are_errors(artifacts: Artifacts) -> None:
    data = artifacts.get("hip_device_ccob.hipfb").read_bytes()
    with pytest.raises(CodeObjectError, match="CCOB version 9 is unsupported"):
        list(iter_code_objects(data[:4] + struct.pack("<H", 9) + data[6:], "x"))
    with pytest.raises(CodeObjectError, match="compression method 7 is unknown"):
        list(iter_code_objects(data[:6] + struct.pack("<H", 7) + data[8:], "x"))
    with pytest.raises(CodeObjectError, match="runs past the end"):
        list(iter_code_objects(data[: len(data) // 2], "x"))
    bundle = artifacts.get("hip_device.hipfb").read_bytes()
    with pytest.raises(CodeObjectError, match="x @0x0: entry hipv4-amdgcn.* runs past the end"):
        list(iter_code_objects(bundle[: len(bundle) - 100], "x"))


# --- errors of the code object reader --------------------------------------------------------


def test_read_code_object_errors_name_the_place_and_the_problem(artifacts: Artifacts, tmp_path: Path) -> None:
    with pytest.raises(CodeObjectError, match="^notes.txt: not an ELF file"):
        read_code_object(b"hello\n", "notes.txt")
    with pytest.raises(CodeObjectError, match=r"^tu_one.o: ELF e_machine is 62, not 224"):
        read_code_object(artifacts.get("tu_one.o").read_bytes(), "tu_one.o")
    hsaco = artifacts.get("cl_gfx1100.hsaco")
    bare = tmp_path / "bare.hsaco"
    artifacts.run("llvm-objcopy-19", "--remove-section=.note", hsaco, bare)
    with pytest.raises(CodeObjectError, match=r"^bare: no metadata note \(owner AMDGPU, type 32\)"):
        read_code_object(bare.read_bytes(), "bare")
    v2 = bytearray(hsaco.read_bytes())
    v2[8] = 0  # EI_ABIVERSION 0 is code object V2, whose metadata is YAML
    with pytest.raises(CodeObjectError, match=r"^v2: code object V2 \(YAML metadata\) is unsupported"):
        read_code_object(bytes(v2), "v2")
    assert isinstance(CodeObjectError("x"), ValueError)
    assert list(iter_code_objects(b"plain text, no device code")) == []


@pytest.mark.parametrize(
    "name", ["cl_gfx90a.hsaco", "hip_device_ccob.hipfb", "two_tu_ccob.so", "offloading.o"]
)
def test_damaged_files_raise_only_code_object_errors(artifacts: Artifacts, name: str) -> None:
    """Flipped bytes and truncations either still parse or raise CodeObjectError, nothing else."""
    rng = random.Random(name)  # deterministic per artifact
    original = artifacts.get(name).read_bytes()
    for _ in range(150):
        data = bytearray(original)
        if rng.random() < 0.3:
            del data[rng.randrange(len(data)) :]
        else:
            for _ in range(rng.randint(1, 6)):
                at = rng.randrange(min(len(data), 1024)) if rng.random() < 0.5 else rng.randrange(len(data))
                data[at : at + 8] = rng.randbytes(8)
        try:
            list(iter_kernels(bytes(data), name))
        except CodeObjectError as exc:
            assert str(exc).startswith(name)


# --- source files ----------------------------------------------------------------------------

#: Files that hold both units' code objects, each tied to its own source: GNU ld's and lld's
#: libraries (lld also with packed relative relocations), an executable, an archive, `ld -r`.
TWO_UNITS = ["two_tu.so", "two_tu_lld.so", "two_tu_relr.so", "two_tu_ccob.so", "two_tu.exe", "two_tu.a"]
TWO_UNITS += ["two_tu_r.o"]


def units_of(artifacts: Artifacts, one: str, two: str) -> set[tuple[str | None, str]]:
    """(source, code object digest) of each unit's own object, named as clang was given it."""
    return {
        (f"{tu}.hip", sha(b.data))
        for tu, name in (("tu_one", one), ("tu_two", two))
        for b in iter_code_objects(artifacts.get(name).read_bytes(), name)
    }


def test_each_objects_code_objects_name_its_translation_unit(artifacts: Artifacts) -> None:
    for tu in ("tu_one", "tu_two"):
        blobs = list(iter_code_objects(artifacts.get(f"{tu}.o").read_bytes(), tu))
        # One blob per target; the source file is clang's FILE symbol, as llvm-readelf lists it.
        symbols = artifacts.run(READELF, "-s", "-W", artifacts.get(f"{tu}.o"))
        assert re.findall(r"\bFILE\s+LOCAL\s+DEFAULT\s+ABS\s+(\S+)", symbols) == [f"{tu}.hip"]
        assert len(blobs) == 2 and {(b.source_file, b.source_note) for b in blobs} == {(f"{tu}.hip", None)}


@pytest.mark.parametrize("name", TWO_UNITS)
def test_linked_files_tie_each_code_object_to_its_unit(artifacts: Artifacts, name: str) -> None:
    """The code objects a link copies from each unit, byte for byte, carry that unit's name."""
    blobs = list(iter_code_objects(artifacts.get(name).read_bytes(), name))
    one, two = ("tu_one_ccob.o", "tu_two_ccob.o") if "ccob" in name else ("tu_one.o", "tu_two.o")
    assert {(b.source_file, sha(b.data)) for b in blobs} == units_of(artifacts, one, two)
    assert len(blobs) == 4 and all(b.source_note is None for b in blobs)


def test_a_kernel_without_a_known_source_says_why(artifacts: Artifacts) -> None:
    def notes(name: str) -> set[tuple[str | None, str | None]]:
        return {
            (b.source_file, b.source_note) for b in iter_code_objects(artifacts.get(name).read_bytes(), name)
        }

    assert notes("two_tu_stripped.so") == {(None, "stripped: no .symtab")}
    discarded = notes("two_tu_discarded.so")
    assert {n for _, n in discarded} == {
        f"no __hip_fatbin_wrapper symbol for the blob at 0x{offset:x}"
        for offset, _ in fatbin_slices(dump_fatbin(artifacts, "two_tu_discarded.so"))
    }
    # -fgpu-rdc links both units' device code into one blob that both wrappers point at.
    assert notes("rdc.so") == {(None, "-fgpu-rdc: one linked blob for several sources (2)")}
    assert notes("hip_device.hipfb") == {
        (None, "a code object or bundle outside a host ELF names no source file")
    }
    assert notes("offloading.o") == {(None, "images of .llvm.offloading are not tied to source files")}


def test_the_scan_writes_the_source_file_and_says_once_per_file_why_not(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    for name in ("two_tu_lld.so", "two_tu_stripped.so"):
        (tmp_path / name).write_bytes(artifacts.get(name).read_bytes())
    found = scan(tmp_path, host_patterns=())
    table = found.tables["amdgpu"]
    assert str(table["source_file"].dtype) == "string"
    linked = table[table["file"] == "two_tu_lld.so"]
    expected = {k.name: f"{tu}.hip" for tu in ("tu_one", "tu_two") for _, k in iter_kernels(
        artifacts.get(f"{tu}.o").read_bytes(), tu)}  # fmt: skip
    assert dict(zip(linked["name"], linked["source_file"], strict=True)) == expected
    assert table[table["file"] == "two_tu_stripped.so"]["source_file"].isna().all()
    assert {f["file"]: f.get("no_source_file") for f in found.files} == {
        "two_tu_lld.so": None,
        "two_tu_stripped.so": "stripped: no .symtab",
    }


def dump_fatbin(artifacts: Artifacts, name: str) -> bytes:
    """The `.hip_fatbin` section of an artifact, as llvm-objcopy dumps it."""
    path = artifacts.get(name)
    dumped = path.with_name(path.name + ".hip_fatbin")
    artifacts.run("llvm-objcopy-19", f"--dump-section=.hip_fatbin={dumped}", path, f"{dumped}.copy")
    return dumped.read_bytes()
