"""The CUDA readers against real nvcc output, figure by figure against cuobjdump.

Nothing stands in: every artifact is built here by nvcc from tests/kernels/cuda (plus one
PTX text, below, that only ptxas can turn into local memory), and the expected side is always
a tool on the same files: NVIDIA's cuobjdump (`--dump-resource-usage`, `-xelf all`), ptxas's
own `-v` report for spill bytes, and nvcc's PTX for launch bounds. No resource figure is
written into this file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import random
import re
import shutil
import struct
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cuda_wheels import find_nvcc
from elftools.elf.elffile import ELFFile

from qualify.compile.cubin import CubinError, CudaKernel, iter_cuda_kernels, read_cubin
from qualify.compile.nvfatbin import FATBIN_MAGIC, iter_cubins
from qualify.compile.ptxaslog import PtxasLogError, attach_spills, read_ptxas_log

SOURCES = Path(__file__).parent / "kernels" / "cuda"


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, else the one the nvidia-cuda-cuobjdump wheel installs."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(root).glob("*/bin/cuobjdump")):
            return str(candidate)
    return None


CUOBJDUMP = find_cuobjdump()  # nvcc: on PATH, else CUDA 13.0.88's from PyPI wheels (cuda_wheels)
pytestmark = pytest.mark.skipif(CUOBJDUMP is None, reason="needs cuobjdump (nvidia-cuda-cuobjdump)")

GENCODE = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"]
# nvcc 13 compresses only PTX by default; "size" compresses cubins with zstd; LZ4 for cubins
# takes "speed" together with fatbinary's -compress-all (which alone picks zstd).
COMPRESSION = {
    "none": ["--compress-mode=none"],
    "default": ["--compress-mode=default"],
    "size": ["--compress-mode=size"],
    "lz4": ["--compress-mode=speed", "-Xfatbin", "-compress-all"],
    "zstd_all": ["-Xfatbin", "-compress-all"],
}
CUBIN_COMPRESSION = {"none": "", "default": "", "size": "zstd", "lz4": "lz4", "zstd_all": "zstd"}

# Module-scope .local variables are legal only in PTX before ISA 3.0, where ptxas turns the
# ABI off and gives the kernel a fixed .nv.local.<name> section: cuobjdump's LOCAL column.
LOCAL_PTX = """\
.version 2.3
.target sm_20
.address_size 64

.local .align 4 .b8 scratch[400];

.visible .entry use_local(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    st.local.u32 [scratch], %r1;
    ld.local.u32 %r2, [scratch+4];
    st.global.u32 [%rd2], %r2;
    ret;
}
"""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Artifacts:
    """Builds each artifact once, on first use, in one temporary directory. A build with
    `-Xptxas -v` leaves ptxas's report next to the artifact as `<name>.log`."""

    def __init__(self, root: Path, nvcc: str) -> None:
        self.root = root
        self.nvcc_path = nvcc
        self.built: dict[str, Path] = {}
        (root / "main.cpp").write_text("int main() { return 0; }\n")

    def run(self, *args: str | Path, cwd: Path | None = None, log: Path | None = None) -> str:
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd)
        if proc.returncode:
            pytest.fail(f"{' '.join(map(str, args))} failed:\n{proc.stderr}")
        if log is not None:
            log.write_text(proc.stderr)
        return proc.stdout

    def nvcc(self, out: Path, *args: str | Path, ptxas_log: bool = False) -> None:
        verbose = ["-Xptxas", "-v"] if ptxas_log else []
        self.run(self.nvcc_path, "-O3", *verbose, *args, "-o", out, log=self.log(out) if ptxas_log else None)

    def get(self, name: str) -> Path:
        if name not in self.built:
            path = self.root / name
            RECIPES[name](self, path)
            self.built[name] = path
        return self.built[name]

    @staticmethod
    def log(path: Path) -> Path:
        return path.with_name(path.name + ".log")

    # --- cuobjdump's view --------------------------------------------------------------------

    def tool_cubins(self, path: Path) -> list[bytes]:
        """The ELF files `cuobjdump -xelf all` extracts from `path`."""
        outdir = self.root / f"{path.name}.xelf"
        outdir.mkdir(exist_ok=True)
        self.run(CUOBJDUMP or "cuobjdump", "-xelf", "all", path.resolve(), cwd=outdir)
        return [file.read_bytes() for file in sorted(outdir.iterdir())]

    def tool_resources(self, path: Path) -> list[tuple[str | None, list[tuple[str, dict[str, int]]]]]:
        """cuobjdump --dump-resource-usage: (arch, [(function, {column: value})]) per cubin,
        in file order; arch is None for a bare cubin, whose output has no fatbin header."""
        out = self.run(CUOBJDUMP or "cuobjdump", "--dump-resource-usage", path)
        blocks: list[tuple[str | None, list[tuple[str, dict[str, int]]]]] = []
        kind, arch, lines = "elf", None, out.splitlines()
        for index, line in enumerate(lines):
            if line.startswith("Fatbin "):  # "Fatbin elf code:", "Fatbin ptx code:"
                kind, arch = line.split()[1], None
            elif match := re.match(r"^arch = (\S+)$", line):
                arch = match.group(1)
            elif line.strip() == "Resource usage:" and kind == "elf":
                blocks.append((arch, []))
            elif match := re.match(r"^\s+Function (\S+):$", line):
                columns = dict(re.findall(r"(\S+?):(\d+)", lines[index + 1]))
                blocks[-1][1].append((match.group(1), {k: int(v) for k, v in columns.items()}))
        return blocks


def _cubin(*args: str, ptxas_log: bool = True) -> Callable[[Artifacts, Path], None]:
    return lambda a, out: a.nvcc(
        out, "-cubin", "-arch=sm_90", *args, SOURCES / "resources.cu", ptxas_log=ptxas_log
    )


def _local(a: Artifacts, out: Path) -> None:
    ptx = a.root / "local.ptx"
    ptx.write_text(LOCAL_PTX)
    a.nvcc(out, "-cubin", "-arch=sm_90", ptx, ptxas_log=True)


def _exe(mode: str) -> Callable[[Artifacts, Path], None]:
    return lambda a, out: a.nvcc(
        out, *GENCODE, *COMPRESSION[mode], SOURCES / "resources.cu", a.root / "main.cpp", ptxas_log=True
    )


def _object(tu: str, *args: str) -> Callable[[Artifacts, Path], None]:
    return lambda a, out: a.nvcc(out, "-c", *GENCODE, *args, SOURCES / f"{tu}.cu", ptxas_log=True)


def _link(*objects: str, extra: tuple[str, ...] = ()) -> Callable[[Artifacts, Path], None]:
    return lambda a, out: a.nvcc(out, *GENCODE, *extra, *(a.get(o) for o in objects))


RECIPES: dict[str, Callable[[Artifacts, Path], None]] = {
    "resources_sm90.cubin": _cubin(),
    "resources_rdc_sm90.cubin": _cubin("-rdc=true"),
    "local_sm90.cubin": _local,
    **{f"resources_{mode}.exe": _exe(mode) for mode in COMPRESSION},
    "libresources.so": lambda a, out: a.nvcc(
        out, "-shared", "-Xcompiler", "-fPIC", *GENCODE, SOURCES / "resources.cu"
    ),
    "resources.fatbin": lambda a, out: a.nvcc(
        out, "-fatbin", *GENCODE, "--compress-mode=size", SOURCES / "resources.cu"
    ),
    "tu_one.o": _object("tu_one"),
    "tu_two.o": _object("tu_two"),
    "two_tu.exe": _link("tu_one.o", "tu_two.o"),
    "two_tu.a": lambda a, out: a.nvcc(out, "-lib", a.get("tu_one.o"), a.get("tu_two.o")),
    "tu_one_rdc.o": _object("tu_one", "-rdc=true"),
    "tu_two_rdc.o": _object("tu_two", "-rdc=true"),
    "two_tu_rdc.exe": _link("tu_one_rdc.o", "tu_two_rdc.o", extra=("-rdc=true",)),
}
CUBINS = ["resources_sm90.cubin", "resources_rdc_sm90.cubin", "local_sm90.cubin"]
FAT = [f"resources_{mode}.exe" for mode in COMPRESSION] + ["libresources.so", "resources.fatbin"]
FAT += ["tu_one.o", "two_tu.exe", "two_tu.a", "tu_one_rdc.o", "two_tu_rdc.exe"]
#: The artifacts `make check` leaves to `make test`: their decoders are reached by others (no
#: compression as with the default mode, zstd as with -compress-all) and their container too (a
#: shared library's is an executable's); `make test` builds and reads every artifact.
SLOW_ARTIFACTS = {"resources_none.exe", "resources_size.exe", "libresources.so"}


def artifact_params(names: list[str]) -> list[Any]:
    """`names` as parameters, those of SLOW_ARTIFACTS marked slow."""
    return [pytest.param(name, marks=pytest.mark.slow) if name in SLOW_ARTIFACTS else name for name in names]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    return Artifacts(tmp_path_factory.mktemp("cuda"), find_nvcc())


def section_registers(cubin: bytes) -> dict[str, int]:
    """Bits 24-31 of sh_info of each `.text.<name>` section, read with pyelftools: what
    cuobjdump prints as REG for a device function (see qualify/compile/cubin.py)."""
    elf = ELFFile(io.BytesIO(cubin))
    return {s.name[6:]: s["sh_info"] >> 24 for s in elf.iter_sections() if s.name.startswith(".text.")}


def cuobjdump_columns(kernel: CudaKernel, registers_byte: int) -> dict[str, int]:
    """What cuobjdump prints for a function read by qualify.compile.cubin: REG from EIATTR_REGCOUNT
    for kernels and from the section header for device functions, STACK from
    EIATTR_MIN_STACK_SIZE, CONSTANT[0] only when the function has a bank 0. These sources use
    no textures, surfaces or samplers, which the reader does not read."""
    if not kernel.entry and registers_byte:  # ptxas wrote the count there too: it must agree
        assert registers_byte == kernel.registers, kernel
    columns = {"REG": kernel.registers if kernel.entry else registers_byte, "STACK": kernel.min_stack or 0}
    columns |= {"SHARED": kernel.shared, "LOCAL": kernel.local}
    if kernel.constant is not None:
        columns["CONSTANT[0]"] = kernel.constant
    return columns | {"TEXTURE": 0, "SURFACE": 0, "SAMPLER": 0}


# --- the readers agree with cuobjdump ---------------------------------------------------------


@pytest.mark.parametrize("name", artifact_params(FAT))
def test_the_cubins_are_the_ones_cuobjdump_extracts(artifacts: Artifacts, name: str) -> None:
    path = artifacts.get(name)
    blobs = list(iter_cubins(path.read_bytes(), name))
    expected = artifacts.tool_cubins(path)
    assert expected
    assert sorted(sha(b.data) for b in blobs) == sorted(sha(e) for e in expected)
    assert all(b.source.startswith(name) for b in blobs)


@pytest.mark.parametrize("name", artifact_params(CUBINS + FAT))
def test_every_function_and_figure_matches_cuobjdump(artifacts: Artifacts, name: str) -> None:
    path = artifacts.get(name)
    ours = []
    for blob in iter_cubins(path.read_bytes(), name):
        kernels = read_cubin(blob.data, blob.source)
        assert {k.target for k in kernels} <= {f"sm_{blob.entry_sm or 90}"}
        registers = section_registers(blob.data)
        ours.append((kernels, [(k.name, cuobjdump_columns(k, registers[k.name])) for k in kernels]))
    tool = artifacts.tool_resources(path)
    # cuobjdump also prints the empty cubins nvcc's device link adds; compare the others,
    # in file order and, inside each cubin, in cuobjdump's order.
    expected = [(arch, functions) for arch, functions in tool if functions]
    assert [(k[0].target, columns) for k, columns in ours if k] == [
        (arch or "sm_90", functions) for arch, functions in expected
    ]
    assert len(expected) >= 1


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(mode, marks=pytest.mark.slow) if f"resources_{mode}.exe" in SLOW_ARTIFACTS else mode
        for mode in COMPRESSION
    ],
)
def test_each_compression_mode_reaches_its_decoder(artifacts: Artifacts, mode: str) -> None:
    name = f"resources_{mode}.exe"
    blobs = list(iter_cubins(artifacts.get(name).read_bytes(), name))
    assert {b.entry_sm for b in blobs} == {80, 90}
    labels = {b.source.rsplit(f"sm_{b.entry_sm}", 1)[1].strip() for b in blobs}
    assert labels == {CUBIN_COMPRESSION[mode]}


def test_two_translation_units_keep_one_container_each(artifacts: Artifacts) -> None:
    data = artifacts.get("two_tu.exe").read_bytes()
    kernels = list(iter_cuda_kernels(data, "exe"))
    names = Counter((k.target, k.name) for k in kernels)
    # axpy<float> is instantiated in both translation units: once per TU and arch.
    assert names[("sm_80", "_Z4axpyIfEvT_PKS0_PS0_i")] == names[("sm_90", "_Z4axpyIfEvT_PKS0_PS0_i")] == 2
    containers = {re.search(r"\.nv_fatbin (@0x[0-9a-f]+)", k.source).group(1) for k in kernels}
    assert len(containers) == 2
    members = {
        b.source.split(" section")[0] for b in iter_cubins(artifacts.get("two_tu.a").read_bytes(), "a")
    }
    assert members == {"a member tu_one.o", "a member tu_two.o"}


def test_relocatable_images_are_read_from_objects_only(artifacts: Artifacts) -> None:
    obj = list(iter_cubins(artifacts.get("tu_one_rdc.o").read_bytes(), "o"))
    assert obj and all(" section __nv_relfatbin " in b.source for b in obj)
    exe = artifacts.get("two_tu_rdc.exe")
    with exe.open("rb") as handle:
        assert ELFFile(handle).get_section_by_name("__nv_relfatbin") is not None  # still there
    linked = list(iter_cubins(exe.read_bytes(), "exe"))
    assert linked and all(" section .nv_fatbin " in b.source for b in linked)


def test_device_functions_have_own_sections_only_with_rdc(artifacts: Artifacts) -> None:
    whole = read_cubin(artifacts.get("resources_sm90.cubin").read_bytes(), "whole")
    assert all(k.entry for k in whole)
    rdc = read_cubin(artifacts.get("resources_rdc_sm90.cubin").read_bytes(), "rdc")
    helpers = [k for k in rdc if not k.entry]
    assert {k.name.split("$")[0] for k in helpers} == {"_Z6helperPKfj"}
    # EIATTR_REGCOUNT has the count; cuobjdump prints REG:0 for them from sm_90 on.
    assert all(k.registers > 0 and k.constant is None for k in helpers)
    assert {k.name for k in rdc if k.entry} == {k.name for k in whole}
    # Relocatable code has no EIATTR_MIN_STACK_SIZE: cuobjdump's STACK is 0 although the
    # spilling kernel's frame is not.
    (spill,) = [k for k in rdc if k.name == "_Z9acc_spillPKfPfi"]
    assert spill.min_stack is None and spill.stack > 0


def test_local_memory_comes_from_the_nv_local_section(artifacts: Artifacts) -> None:
    path = artifacts.get("local_sm90.cubin")
    (kernel,) = read_cubin(path.read_bytes(), "local")
    usage = read_ptxas_log(Artifacts.log(path).read_text(), "log")[("sm_90", "use_local")]
    assert kernel.local == usage.local > 0
    assert usage.stack_frame is None  # without the ABI ptxas prints no "Function properties"
    assert attach_spills([kernel], {("sm_90", "use_local"): usage}) == [kernel]


def ptx_directives(ptx: str) -> dict[str, dict[str, tuple[int, ...]]]:
    """Per .entry, its performance-tuning directives (.maxntid, .reqntid, .maxnreg)."""
    found: dict[str, dict[str, tuple[int, ...]]] = {}
    for match in re.finditer(r"\.entry (\S+)\((.*?)\)(.*?)\{", ptx, re.S):
        directives = re.findall(r"\.(maxntid|reqntid|maxnreg)\s+([\d, ]+)", match.group(3))
        found[match.group(1)] = {d: tuple(int(v) for v in values.split(",")) for d, values in directives}
    return found


def test_launch_bounds_match_the_ptx_directives(artifacts: Artifacts) -> None:
    ptx = artifacts.root / "resources_sm90.ptx"
    artifacts.run(artifacts.nvcc_path, "-ptx", "-arch=sm_90", "-O3", SOURCES / "resources.cu", "-o", ptx)
    directives = ptx_directives(ptx.read_text())
    kernels = read_cubin(artifacts.get("resources_sm90.cubin").read_bytes(), "cubin")
    assert sorted(directives) == sorted(k.name for k in kernels)
    for kernel in kernels:
        wanted = directives[kernel.name]
        assert kernel.max_threads == wanted.get("maxntid"), kernel.name
        assert kernel.reqntid == wanted.get("reqntid"), kernel.name
        if "maxnreg" in wanted:
            assert (kernel.maxreg_count,) == wanted["maxnreg"], kernel.name
    assert any(k.reqntid for k in kernels) and any(k.max_threads for k in kernels)
    assert any("maxnreg" in d for d in directives.values())


# --- spill bytes from the ptxas report --------------------------------------------------------


@pytest.mark.parametrize("name", artifact_params(["resources_sm90.cubin", "resources_none.exe"]))
def test_the_spilling_kernel_spills_as_ptxas_reports(artifacts: Artifacts, name: str) -> None:
    path = artifacts.get(name)
    usage = read_ptxas_log(Artifacts.log(path).read_text(), "log")
    kernels = attach_spills(iter_cuda_kernels(path.read_bytes(), name), usage)
    targets = {k.target for k in kernels}
    assert targets == ({"sm_90"} if name.endswith(".cubin") else {"sm_80", "sm_90"})
    for target in targets:
        spill = usage[(target, "_Z9acc_spillPKfPfi")]
        assert spill.spill_stores and spill.spill_loads  # it really spills
    for kernel in kernels:
        report = usage[(kernel.target, kernel.name)]
        assert (kernel.spill_store_bytes, kernel.spill_load_bytes) == (
            report.spill_stores,
            report.spill_loads,
        )
        assert (kernel.registers, kernel.stack) == (report.registers, report.stack_frame)
        assert kernel.spill_store_bytes is not None
        if kernel.name != "_Z9acc_spillPKfPfi":
            assert kernel.spill_store_bytes == kernel.spill_load_bytes == 0


def test_device_functions_take_the_arch_of_their_ptxas_run(artifacts: Artifacts) -> None:
    path = artifacts.get("resources_rdc_sm90.cubin")
    usage = read_ptxas_log(Artifacts.log(path).read_text(), "log")
    kernels = attach_spills(read_cubin(path.read_bytes(), "rdc"), usage)
    helpers = [k for k in kernels if not k.entry]
    assert helpers and all(k.spill_store_bytes == 0 for k in helpers)
    assert all(not usage[("sm_90", k.name)].entry for k in helpers)
    # In this report the first helper precedes every "Compiling entry function" line.
    text = Artifacts.log(path).read_text()
    assert text.index(helpers[0].name) < text.index("Compiling entry function")


def test_nvlink_and_other_tools_lines_are_skipped(artifacts: Artifacts) -> None:
    link = artifacts.root / "link.log"
    out = artifacts.root / "linked.exe"
    artifacts.run(
        artifacts.nvcc_path, *GENCODE, "-rdc=true", "--resource-usage", artifacts.get("tu_one_rdc.o"),
        artifacts.get("tu_two_rdc.o"), "-o", out, log=link,
    )  # fmt: skip
    assert "nvlink info" in link.read_text()
    compile_log = Artifacts.log(artifacts.get("tu_one_rdc.o")).read_text()
    alone = read_ptxas_log(compile_log, "x")
    both = read_ptxas_log(compile_log + link.read_text(), "x")
    assert both == alone and alone


def test_unparseable_reports_name_the_file_and_line(artifacts: Artifacts) -> None:
    text = Artifacts.log(artifacts.get("resources_sm90.cubin")).read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "bytes spill stores" in line)
    broken = "\n".join([*lines[:at], lines[at].replace("spill stores", "spilled"), *lines[at + 1 :]])
    with pytest.raises(PtxasLogError, match=rf"^k\.log:{at + 1}: expected '<n> bytes stack frame"):
        read_ptxas_log(broken, "k.log")
    used = next(i for i, line in enumerate(lines) if "Used" in line)
    broken = "\n".join([*lines[:used], lines[used] + ", 7 bytes mystery", *lines[used + 1 :]])
    with pytest.raises(PtxasLogError, match=rf"^k\.log:{used + 1}: unknown item '7 bytes mystery'"):
        read_ptxas_log(broken, "k.log")
    with pytest.raises(PtxasLogError, match=r"^empty\.log: no 'ptxas info' line"):
        read_ptxas_log("nvcc warning : nothing compiled\n", "empty.log")
    assert isinstance(PtxasLogError("x"), ValueError)


# --- errors ------------------------------------------------------------------------------------


def section_range(data: bytes, name: str) -> tuple[int, int]:
    """File offsets (start, end) of section `name` of an ELF file."""
    section = ELFFile(io.BytesIO(data)).get_section_by_name(name)
    return int(section["sh_offset"]), int(section["sh_offset"] + section["sh_size"])


def fatbin_offset(data: bytes) -> int:
    """File offset of the first fatbin container: the .nv_fatbin section of an ELF file (host
    code may hold the magic as a constant), else the first magic."""
    if data.startswith(b"\x7fELF"):
        return section_range(data, ".nv_fatbin")[0]
    return data.index(struct.pack("<I", FATBIN_MAGIC))


def test_framing_errors_name_the_place_and_the_problem(artifacts: Artifacts) -> None:
    fatbin = artifacts.get("resources.fatbin").read_bytes()
    entry = fatbin_offset(fatbin) + 16  # the first entry follows the 16-byte container header
    with pytest.raises(CubinError, match=r"^f @0x0: fatbin container of \d+ bytes runs past the end"):
        list(iter_cubins(fatbin[: len(fatbin) // 2], "f"))
    with pytest.raises(CubinError, match=r"^f @0x0: fatbin container version 2 is unsupported"):
        list(iter_cubins(fatbin[:4] + struct.pack("<H", 2) + fatbin[6:], "f"))
    kind7 = fatbin[:entry] + struct.pack("<H", 7) + fatbin[entry + 2 :]
    with pytest.raises(CubinError, match=rf"^f @0x0 entry @0x{entry:x}: entry kind 7 is unknown"):
        list(iter_cubins(kind7, "f"))
    (flags,) = struct.unpack_from("<Q", fatbin, entry + 40)
    both = fatbin[: entry + 40] + struct.pack("<Q", flags | 0xA000) + fatbin[entry + 48 :]
    with pytest.raises(CubinError, match=r"^f @0x0 entry @0x10 sm_\d+: entry flags name both LZ4 and zstd"):
        list(iter_cubins(both, "f"))
    lz4 = artifacts.get("resources_lz4.exe").read_bytes()
    blob = next(b for b in iter_cubins(lz4, "exe") if len(b.data) > 10000)
    where = re.search(r"@0x[0-9a-f]+ entry @0x([0-9a-f]+) sm_\d+ lz4$", blob.source)
    start = fatbin_offset(lz4) + int(where.group(1), 16)
    header = struct.unpack_from("<I", lz4, start + 4)[0]
    damaged = lz4[: start + header + 100] + bytes(64) + lz4[start + header + 164 :]
    with pytest.raises(CubinError, match=rf"^{re.escape(blob.source)}: "):
        list(iter_cubins(damaged, "exe"))
    assert list(iter_cubins(b"plain text, no device code")) == []
    assert isinstance(CubinError("x"), ValueError)


def test_read_cubin_errors_name_the_place_and_the_problem(artifacts: Artifacts) -> None:
    with pytest.raises(CubinError, match=r"^notes\.txt: not an ELF file"):
        read_cubin(b"hello\n", "notes.txt")
    with pytest.raises(CubinError, match=r"^tu_one\.o: ELF e_machine is 62, not 190"):
        read_cubin(artifacts.get("tu_one.o").read_bytes(), "tu_one.o")
    cubin = bytearray(artifacts.get("resources_sm90.cubin").read_bytes())
    cubin[8] = 3
    with pytest.raises(CubinError, match=r"^c: EI_ABIVERSION 3 is not a known CUDA ELF ABI"):
        read_cubin(bytes(cubin), "c")


def damage(rng: random.Random, data: bytes, hot: tuple[int, int]) -> bytes:
    """`data` truncated or with 8-byte runs overwritten, half of them inside `hot`."""
    out = bytearray(data)
    if rng.random() < 0.3:
        del out[rng.randrange(len(out)) :]
        return bytes(out)
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(*hot) if rng.random() < 0.5 else rng.randrange(len(out))
        out[at : at + 8] = rng.randbytes(8)
    return bytes(out)


@pytest.mark.parametrize(
    "name",
    artifact_params(
        ["resources_sm90.cubin", "resources.fatbin", "resources_lz4.exe", "resources_size.exe", "two_tu.a"]
    ),
)
def test_damaged_files_raise_only_cubin_errors(artifacts: Artifacts, name: str) -> None:
    """Overwritten bytes and truncations either still parse or raise CubinError, nothing else."""
    rng = random.Random(name)  # deterministic per artifact
    original = artifacts.get(name).read_bytes()
    if name.endswith(".cubin"):
        hot = section_range(original, ".nv.info")
    else:
        start = fatbin_offset(original)
        hot = (start, min(len(original), start + 4096))
    for _ in range(150):
        try:
            list(iter_cuda_kernels(damage(rng, original, hot), name))
        except CubinError as exc:
            assert str(exc).startswith(name)
