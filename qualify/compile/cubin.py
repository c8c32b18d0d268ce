"""Per-function resource figures from CUDA cubins.

Contract of `read_cubin(data, where)`: `data` is one cubin (an ELF64 file for EM_CUDA, e.g.
from `qualify.compile.nvfatbin.iter_cubins`); the result has one `CudaKernel` per function that
`cuobjdump --dump-resource-usage` lists, in its order, with figures exactly as ptxas or
nvlink wrote them. Anything unreadable raises `CubinError` naming `where` and the problem;
nothing is guessed. `iter_cuda_kernels` does the same for every cubin in any file
`iter_cubins` reads.

Which functions: one per code section `.text.<name>`, in section order; that is cuobjdump's
"Function" list. Kernels (STO_CUDA_ENTRY, `entry=True`) always have one. A `__device__`
function has one only in relocatable code (`-rdc`) or when nvlink keeps it as a separate
function (names like `<mangled>$1`); a whole-program compile places it inside its caller's
section, and then neither cuobjdump nor this reader lists it.

Where the figures live (names from cuobjdump's EIATTR strings; codes as in the GVirtuS and
cricket headers, every value checked against cuobjdump 13.5 on nvcc 13.0 output):
- `.nv.info` holds records {u8 format, u8 attribute, ...}. Formats 1 (no value), 2 (u8) and
  3 (u16) take 4 bytes; format 4 is {u16 length, data}. Function-wide figures are format-4
  records {u32 symbol index, u32 value}: EIATTR_REGCOUNT 0x2f, EIATTR_FRAME_SIZE 0x11,
  EIATTR_MIN_STACK_SIZE 0x12, EIATTR_MAX_STACK_SIZE 0x23.
- `.nv.info.<name>` holds EIATTR_MAXREG_COUNT 0x1b (u16), EIATTR_MAX_THREADS 0x05 and
  EIATTR_REQNTID 0x10 (3 × u32 each).
- Shared memory is the size of `.nv.shared.<name>` (linked sm_90 code includes a 1 KiB
  reserve), local memory the size of `.nv.local.<name>` (only code compiled without the ABI
  has one), constant bank 0 (parameters) the size of `.nv.constant0.<name>`.

How cuobjdump prints them (found by editing single fields of real cubins): REG is
EIATTR_REGCOUNT for kernels; for a device function it is bits 24-31 of its code section's
sh_info, where ptxas writes the same count for targets before sm_90 and 0 from sm_90 on, so
`registers` (always EIATTR_REGCOUNT) is the figure to compare. STACK is EIATTR_MIN_STACK_SIZE
(0 when absent), not the frame size: in whole-program code the two are equal; nvlink computes
it over the call graph; relocatable (`-rdc`) cubins have none. Spill bytes are not in a
cubin: `qualify.compile.ptxaslog` reads them from ptxas's `-v` output.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from elftools.elf.elffile import ELFFile

from qualify.compile.nvfatbin import EM_CUDA, CubinError, iter_cubins
from qualify.compile.offloadbundle import ELF_ERRORS

__all__ = ["CubinError", "CudaKernel", "iter_cuda_kernels", "read_cubin"]

# EI_ABIVERSION 7 (LLVM ELFABIVERSION_CUDA_V1) keeps the SM in e_flags bits 0-7; version 8
# (ELFABIVERSION_CUDA_V2, written by CUDA 13 for every target) keeps it in bits 8-15. Neither
# tells sm_90 from sm_90a: both read as "sm_90".
_SM_FROM_FLAGS = {7: lambda flags: flags & 0xFF, 8: lambda flags: (flags >> 8) & 0xFF}
STO_CUDA_ENTRY = 0x10  # st_other bit of kernel symbols
STT_FUNC = 2
SHN_XINDEX = 0xFFFF
EIATTR_MAX_THREADS = 0x05
EIATTR_REQNTID = 0x10
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_MAXREG_COUNT = 0x1B
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
_PER_SYMBOL = {
    EIATTR_REGCOUNT: "registers",
    EIATTR_FRAME_SIZE: "stack",
    EIATTR_MIN_STACK_SIZE: "min_stack",
    EIATTR_MAX_STACK_SIZE: "max_stack",
}
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
_TEXT = ".text."
_TABLES = ("SHT_SYMTAB", "SHT_STRTAB", "SHT_SYMTAB_SHNDX")


@dataclass(frozen=True)
class CudaKernel:
    """One function of one cubin. `name` is the mangled name as in the symbol table; `entry`
    is True for a kernel (STO_CUDA_ENTRY) and False for a device function.

    `stack` is the function's own frame (EIATTR_FRAME_SIZE); `min_stack` and `max_stack` are
    None when the cubin has no such record. `constant` is None when the function has no
    constant bank 0 (device functions). `maxreg_count` is the register cap ptxas applied
    (255 when nothing capped it), `max_threads` and `reqntid` the (x, y, z) launch bounds of
    `__launch_bounds__` / `.maxntid` and `.reqntid`. The spill fields stay None until
    `qualify.compile.ptxaslog.attach_spills` fills them from a ptxas log.
    """

    target: str
    name: str
    entry: bool
    registers: int
    stack: int
    min_stack: int | None
    max_stack: int | None
    shared: int
    local: int
    constant: int | None
    max_threads: tuple[int, int, int] | None
    reqntid: tuple[int, int, int] | None
    maxreg_count: int | None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    source: str = ""


def iter_cuda_kernels(data: bytes, origin: str = "") -> Iterator[CudaKernel]:
    """Every function of every cubin in `data` (any container `iter_cubins` reads)."""
    for blob in iter_cubins(data, origin):
        yield from read_cubin(blob.data, blob.source)


@dataclass(frozen=True)
class _Section:
    name: str
    kind: str | int  # pyelftools gives the number of a type it has no name for
    size: int
    link: int
    data: bytes


def read_cubin(data: bytes, where: str) -> list[CudaKernel]:
    """The functions of one cubin, as cuobjdump lists them; raises CubinError naming `where`."""
    if not data.startswith(b"\x7fELF"):
        raise CubinError(f"{where}: not an ELF file (no \\x7fELF magic)")
    if len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise CubinError(f"{where}: not a little-endian ELF64 file, as cubins are")
    machine, _, _, _, _, flags = struct.unpack_from("<HIQQQI", data, 18)
    if machine != EM_CUDA:
        raise CubinError(f"{where}: ELF e_machine is {machine}, not {EM_CUDA} (EM_CUDA)")
    if data[8] not in _SM_FROM_FLAGS:
        raise CubinError(f"{where}: EI_ABIVERSION {data[8]} is not a known CUDA ELF ABI (7 or 8)")
    target = f"sm_{_SM_FROM_FLAGS[data[8]](flags)}"
    # All pyelftools reads happen here, so that its errors on a damaged file become ours.
    try:
        elf = ELFFile(io.BytesIO(data))
        # Only the tables are read; code, constant and shared sections count by their size.
        sections = [
            _Section(
                s.name,
                s["sh_type"],
                s["sh_size"],
                s["sh_link"],
                s.data() if s["sh_type"] in _TABLES or s.name.startswith(".nv.info") else b"",
            )
            for s in elf.iter_sections()
        ]
    except ELF_ERRORS as exc:
        raise CubinError(f"{where}: malformed ELF file: {exc!r}") from exc
    by_name = {s.name: s for s in sections}
    symbols = _symbols(sections, where)
    functions = [s for s in sections if s.name.startswith(_TEXT) and s.kind == "SHT_PROGBITS"]
    # Symbol index -> function: the function's own symbol, named like its section. Other
    # symbols in a code section (a callee placed in its caller's section) are not functions.
    owner: dict[int, str] = {}
    entries: set[str] = set()
    for index, (name, info, other, shndx) in enumerate(symbols):
        if info & 0xF == STT_FUNC and 0 < shndx < len(sections) and sections[shndx].name == _TEXT + name:
            owner[index] = name
            if other & STO_CUDA_ENTRY:
                entries.add(name)
    figures: dict[str, dict[str, int]] = {}
    info_section = by_name.get(".nv.info")
    for attribute, value in _records(info_section.data if info_section else b"", f"{where} .nv.info"):
        if attribute in _PER_SYMBOL and len(value) == 8:
            symbol, number = struct.unpack("<II", value)
            if symbol >= len(symbols):
                raise CubinError(
                    f"{where} .nv.info: attribute 0x{attribute:02x} names symbol {symbol}, "
                    f"past the {len(symbols)} symbols"
                )
            if symbol in owner:
                figures.setdefault(owner[symbol], {})[_PER_SYMBOL[attribute]] = number
    kernels = []
    for section in functions:
        name = section.name[len(_TEXT) :]
        found = figures.get(name, {})
        for required in ("registers", "stack"):
            if required not in found:
                raise CubinError(f"{where}: function {name} has no {required} record in .nv.info")
        max_threads, reqntid, maxreg_count = _own_attributes(
            by_name.get(".nv.info." + name), f"{where} .nv.info.{name}"
        )
        constant = by_name.get(".nv.constant0." + name)
        kernels.append(
            CudaKernel(
                target=target,
                name=name,
                entry=name in entries,
                registers=found["registers"],
                stack=found["stack"],
                min_stack=found.get("min_stack"),
                max_stack=found.get("max_stack"),
                shared=_size(by_name.get(".nv.shared." + name)),
                local=_size(by_name.get(".nv.local." + name)),
                constant=None if constant is None else constant.size,
                max_threads=max_threads,
                reqntid=reqntid,
                maxreg_count=maxreg_count,
                source=where,
            )
        )
    return kernels


def _size(section: _Section | None) -> int:
    return 0 if section is None else section.size


def _symbols(sections: list[_Section], where: str) -> list[tuple[str, int, int, int]]:
    """(name, st_info, st_other, section index) of every .symtab entry, from the raw bytes:
    pyelftools keeps only the visibility bits of st_other and drops STO_CUDA_ENTRY."""
    table = next((s for s in sections if s.kind == "SHT_SYMTAB"), None)
    if table is None:
        raise CubinError(f"{where}: no symbol table (.symtab)")
    if not 0 < table.link < len(sections):
        raise CubinError(f"{where}: symbol table links to section {table.link}, which does not exist")
    strings = sections[table.link].data
    # Section indices >= 0xff00 are in SHT_SYMTAB_SHNDX, one u32 per symbol.
    extended = next((s.data for s in sections if s.kind == "SHT_SYMTAB_SHNDX"), b"")
    result = []
    for index in range(len(table.data) // 24):
        name_at, info, other, shndx = struct.unpack_from("<IBBH", table.data, index * 24)
        if shndx == SHN_XINDEX and 4 * index + 4 <= len(extended):
            (shndx,) = struct.unpack_from("<I", extended, 4 * index)
        end = strings.find(b"\0", name_at)
        if name_at >= len(strings) or end < 0:
            raise CubinError(f"{where}: symbol {index} has a name offset past the string table")
        result.append((strings[name_at:end].decode("utf-8", "replace"), info, other, shndx))
    return result


def _records(data: bytes, where: str) -> Iterator[tuple[int, bytes]]:
    """(attribute, value bytes) of every EIATTR record in an `.nv.info` section."""
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CubinError(f"{where}: record at 0x{pos:x} is truncated")
        fmt, attribute = data[pos], data[pos + 1]
        if fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
            yield attribute, data[pos + 2 : pos + 4]
            pos += 4
        elif fmt == EIFMT_SVAL:
            (length,) = struct.unpack_from("<H", data, pos + 2)
            if pos + 4 + length > len(data):
                raise CubinError(f"{where}: record 0x{attribute:02x} at 0x{pos:x} runs past the section")
            yield attribute, data[pos + 4 : pos + 4 + length]
            pos += 4 + length
        else:
            raise CubinError(f"{where}: record at 0x{pos:x} has unknown format {fmt}")


Dim3 = tuple[int, int, int]


def _own_attributes(section: _Section | None, where: str) -> tuple[Dim3 | None, Dim3 | None, int | None]:
    """(MAX_THREADS, REQNTID, MAXREG_COUNT) from `.nv.info.<name>`, None where absent."""
    max_threads: Dim3 | None = None
    reqntid: Dim3 | None = None
    maxreg_count: int | None = None
    for attribute, value in _records(section.data if section else b"", where):
        if attribute == EIATTR_MAXREG_COUNT:
            maxreg_count = int.from_bytes(value[:2], "little")
        elif attribute in (EIATTR_MAX_THREADS, EIATTR_REQNTID):
            if len(value) != 12:
                raise CubinError(f"{where}: attribute 0x{attribute:02x} holds {len(value)} bytes, not 12")
            x, y, z = struct.unpack("<III", value)
            if attribute == EIATTR_MAX_THREADS:
                max_threads = (x, y, z)
            else:
                reqntid = (x, y, z)
    return max_threads, reqntid, maxreg_count
