"""Which translation unit (source file) each device-code blob of a host ELF file was compiled from.

Contract of `source_files(elf, data, layout)`: `data` is a host ELF file (`elf` its pyelftools
view) with the blob section of `layout` (HIP: `.hip_fatbin`; CUDA: `.nv_fatbin`); the result
maps the offset in that section of each blob a translation unit registers to the name of the
unit's source file, as the compiler wrote it in the STT_FILE symbol, and says why for any blob
it cannot name (`SourceFiles.of`). Nothing is guessed from kernel names.

How a blob is tied to its unit: the compiler emits, per translation unit, a wrapper {u32 magic,
u32 version, u64 pointer to the blob, u64} in a segment section (HIP: `.hipFatBinSegment`,
"HIPF", the LOCAL symbol `__hip_fatbin_wrapper`; CUDA: `.nvFatBinSegment`, 0x466243b1,
`_ZL15__fatDeviceText`); a file's local symbols follow its STT_FILE symbol in `.symtab`, so the
FILE symbol before a wrapper names its unit. The pointer is a relocation: in an object (ET_REL)
an absolute one against a symbol of the blob section (the addend is the blob's offset), in a
linked library or executable a relative dynamic one (the addend is the blob's address), or
stored in place where no relocation covers it (`-z pack-relative-relocs`,
`--apply-dynamic-relocs`).

The names: clang writes the source's basename (`mmq-instance-q4_k.cu`). nvcc compiles the host
side of `x.cu` from an intermediate `tmpxft_<ids>_x.cudafe1.cpp`, whose name the FILE symbol
holds: the unit is named `x.cu`, the source nvcc named that intermediate after (its stem, with
the suffix nvcc compiles as CUDA; a source given another suffix with `-x cu` is named `.cu`
too), the same from one build to the next. A FILE symbol of another form is kept as written.

It cannot be said when the file is stripped (no `.symtab`), its wrappers or FILE symbols were
discarded (`--discard-all`), or several units share one linked blob (`-fgpu-rdc`, nvcc's
device link). The symbol and relocation tables are read as arrays over the raw section bytes: a
linked library holds some 100 000 of each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from elftools.elf.elffile import ELFFile

WRAPPER_SIZE = 24
STT_FILE = 4
_SYM = np.dtype(
    [("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"), ("size", "<u8")]
)
_RELA = np.dtype([("offset", "<u8"), ("info", "<u8"), ("addend", "<i8")])
# Per e_machine, the relocation types a wrapper's pointer can carry: (absolute 64-bit, relative).
_RELOCATIONS = {"EM_X86_64": (1, 8), "EM_AARCH64": (257, 1027)}


@dataclass(frozen=True)
class Layout:
    """Where a toolchain puts its blobs and their wrappers, and how it names a unit's source."""

    blobs: str  # the section of the blobs
    segment: str  # the section of the wrappers
    magic: int  # a wrapper's first word
    wrapper: str  # a wrapper's LOCAL symbol
    rdc: str  # the option that links several units' device code into one blob
    #: An intermediate file's name, its `stem` group the source's stem (nvcc's `.cudafe1.cpp`).
    intermediate: re.Pattern[str] | None = None
    source_suffix: str = ""  # what the source's stem is named with
    device_link: str | None = None  # the unit a separate device link registers its blob from

    def unit(self, name: str) -> str:
        """The source file a unit's FILE symbol names: itself, or the source an intermediate
        file of the toolchain was made from."""
        found = self.intermediate.fullmatch(name) if self.intermediate is not None else None
        return found["stem"] + self.source_suffix if found else name


HIP = Layout(".hip_fatbin", ".hipFatBinSegment", 0x48495046, "__hip_fatbin_wrapper", "-fgpu-rdc")  # "HIPF"
# nvcc compiles the host side of <stem>.cu from tmpxft_<pid>_<counter>-<step>_<stem>.cudafe1.cpp.
CUDA = Layout(
    ".nv_fatbin",
    ".nvFatBinSegment",
    0x466243B1,
    "_ZL15__fatDeviceText",
    "-rdc",
    re.compile(r"tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_(?P<stem>.+)\.cudafe1\.cpp"),
    ".cu",
    "link.stub",
)


@dataclass(frozen=True)
class SourceFiles:
    """Blob offset in its section -> source file; why not, per blob (`problems`), and for any
    other blob (`reason`; None: no wrapper points at it)."""

    names: Mapping[int, str] = field(default_factory=dict)
    problems: Mapping[int, str] = field(default_factory=dict)
    reason: str | None = None

    def of(self, offset: int) -> tuple[str | None, str | None]:
        """(source file, None) for the blob at `offset`, or (None, why it cannot be said)."""
        if offset in self.names:
            return self.names[offset], None
        if offset in self.problems:
            return None, self.problems[offset]
        return None, self.reason or f"no wrapper points at the blob at 0x{offset:x}"


def unknown(reason: str) -> SourceFiles:
    """No blob of the file can be tied to a source, for `reason`."""
    return SourceFiles(reason=reason)


class _Section(NamedTuple):
    name: str
    kind: str
    address: int
    offset: int
    size: int
    link: int
    info: int


def source_files(elf: ELFFile, data: bytes, layout: Layout = HIP) -> SourceFiles:
    """The source file of each blob in `layout`'s section of `data` (see the module)."""
    if elf.elfclass != 64 or not elf.little_endian:
        return unknown("source files are read from little-endian 64-bit host ELF files only")
    sections = [
        _Section(s.name, s["sh_type"], s["sh_addr"], s["sh_offset"], s["sh_size"], s["sh_link"], s["sh_info"])
        for s in elf.iter_sections()
    ]
    index = {s.name: i for i, s in reversed(list(enumerate(sections)))}  # the first of a name
    if layout.blobs not in index or layout.segment not in index:
        return unknown(f"no {layout.segment} wrappers: nothing ties a blob to its source")
    symtab = next((i for i, s in enumerate(sections) if s.kind == "SHT_SYMTAB"), None)
    if symtab is None:
        return unknown("stripped: no .symtab")
    fatbin, segment = index[layout.blobs], index[layout.segment]
    tables = _Tables(data, sections)
    try:
        units = _wrapper_units(tables, symtab, segment, layout)
        pointers = _wrapper_pointers(tables, elf, segment, fatbin, layout.magic)
    except _Unreadable as exc:
        return unknown(str(exc))
    return _by_blob(units, pointers, layout)


class _Unreadable(Exception):
    """A table the answer needs runs past the end of the file (the message says which)."""


class _Tables:
    """The raw bytes of sections, and symbol tables as arrays, read once each."""

    def __init__(self, data: bytes, sections: list[_Section]) -> None:
        self.data, self.sections = data, sections
        self._symbols: dict[int, np.ndarray[Any, Any]] = {}

    def raw(self, index: int) -> bytes:
        s = self.sections[index]
        if s.kind == "SHT_NOBITS" or s.offset + s.size > len(self.data):
            raise _Unreadable(f"section {s.name or index} runs past the end of the file")
        return self.data[s.offset : s.offset + s.size]

    def array(self, index: int, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
        raw = self.raw(index)
        return np.frombuffer(raw, dtype, count=len(raw) // dtype.itemsize)

    def symbols(self, index: int) -> np.ndarray[Any, Any]:
        if index not in self._symbols:
            self._symbols[index] = self.array(index, _SYM)
        return self._symbols[index]

    def name(self, table: int, offset: int) -> str:
        strings = self.raw(self.sections[table].link)
        end = strings.find(b"\0", offset)
        return strings[offset : end if end >= 0 else len(strings)].decode("utf-8", "replace")


def _wrapper_units(tables: _Tables, symtab: int, segment: int, layout: Layout) -> dict[int, str | None]:
    """Wrapper address -> the source its FILE symbol names (None: no FILE symbol before it)."""
    symbols = tables.symbols(symtab)
    files = np.flatnonzero((symbols["info"] & 0xF) == STT_FILE)
    units: dict[int, str | None] = {}
    for i in np.flatnonzero(symbols["shndx"] == segment).tolist():
        if tables.name(symtab, int(symbols["name"][i])) != layout.wrapper:
            continue
        # A file's local symbols follow its FILE symbol: the last one before the wrapper.
        before = int(np.searchsorted(files, i)) - 1
        unit = tables.name(symtab, int(symbols["name"][files[before]])) if before >= 0 else None
        units[int(symbols["value"][i])] = layout.unit(unit) if unit else None
    return units


def _wrapper_pointers(
    tables: _Tables, elf: ELFFile, segment: int, fatbin: int, magic: int
) -> dict[int, int | str]:
    """Wrapper address -> the offset in the blob section its pointer holds, or why it is not known."""
    seg, blobs = tables.sections[segment], tables.sections[fatbin]
    raw = tables.raw(segment)
    relocatable = elf["e_type"] == "ET_REL"
    absolute, relative = _RELOCATIONS.get(elf["e_machine"], (-1, -1))
    # A relocatable object's relocations of the segment are its own RELA section's; a linked
    # file's are the dynamic ones (sh_info 0), or static ones kept by --emit-relocs.
    fixes: dict[int, tuple[int, int, int, int]] = {}
    for i, s in enumerate(tables.sections):
        if s.kind != "SHT_RELA" or s.info not in ((segment,) if relocatable else (0, segment)):
            continue
        relas = tables.array(i, _RELA)
        mine = relas[(relas["offset"] >= seg.address) & (relas["offset"] < seg.address + seg.size)]
        for offset, info, addend in mine.tolist():
            fixes[offset] = (info & 0xFFFFFFFF, info >> 32, addend, s.link)
    found: dict[int, int | str] = {}
    for slot in range(len(raw) // WRAPPER_SIZE):
        at = seg.address + slot * WRAPPER_SIZE
        if int.from_bytes(raw[slot * WRAPPER_SIZE : slot * WRAPPER_SIZE + 4], "little") != magic:
            continue
        fix = fixes.get(at + 8)
        if fix is None and relocatable:
            found[at] = f"no relocation sets the pointer of the wrapper at 0x{at:x}"
            continue
        if fix is None:
            target = int.from_bytes(raw[slot * WRAPPER_SIZE + 8 : slot * WRAPPER_SIZE + 16], "little")
        elif fix[0] == relative and not relocatable:
            target = fix[2]
        elif fix[0] == absolute:
            symbols = tables.symbols(fix[3])
            if fix[1] >= len(symbols):
                raise _Unreadable(f"a relocation of the wrapper at 0x{at:x} names no symbol")
            symbol = symbols[fix[1]]
            if symbol["shndx"] == 0:
                name = tables.name(fix[3], int(symbol["name"]))
                found[at] = f"the wrapper at 0x{at:x} points at the undefined symbol {name}"
                continue
            if relocatable and symbol["shndx"] != fatbin:
                found[at] = f"the wrapper at 0x{at:x} points outside {blobs.name}"
                continue
            target = int(symbol["value"]) + fix[2]
        else:
            found[at] = f"the wrapper at 0x{at:x} has a relocation of type {fix[0]}, not read"
            continue
        offset = target - blobs.address
        within = 0 <= offset < blobs.size
        found[at] = offset if within else f"the wrapper at 0x{at:x} points outside {blobs.name}"
    return found


def _by_blob(units: dict[int, str | None], pointers: dict[int, int | str], layout: Layout) -> SourceFiles:
    """Each blob's source: the one unit whose wrappers point at it."""
    wrappers: dict[int, list[int]] = {}
    problems: dict[int, str] = {}
    # A wrapper whose pointer is not known may be the one of any blob no other wrapper names.
    reason = next((p for p in pointers.values() if isinstance(p, str)), None)
    for at, pointer in pointers.items():
        if not isinstance(pointer, str):
            wrappers.setdefault(pointer, []).append(at)
    names: dict[int, str] = {}
    for offset, ats in wrappers.items():
        if any(at not in units for at in ats):
            problems[offset] = f"no {layout.wrapper} symbol for the blob at 0x{offset:x}"
            continue
        sources = {units[at] for at in ats}
        if None in sources:
            problems[offset] = f"no FILE symbol before the {layout.wrapper} of the blob at 0x{offset:x}"
        elif len(sources) > 1:
            problems[offset] = f"{layout.rdc}: one linked blob for several sources ({len(sources)})"
        elif layout.device_link is not None and sources == {layout.device_link}:
            # nvcc's device link (`-dlink`, or `-rdc` at the link) registers the device code of
            # every relocatable unit it linked from this one stub.
            problems[offset] = (
                f"{layout.rdc}: the device link ({layout.device_link}) holds several sources' code"
            )
        else:
            names[offset] = str(sources.pop())
    return SourceFiles(names, problems, reason)
