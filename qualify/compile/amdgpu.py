"""Per-kernel resource figures from AMDGPU code objects (code object V3 to V6).

Contract of `read_code_object(data, where)`: `data` is one AMDGPU HSA code object (an ELF
file, e.g. from `qualify.compile.offloadbundle.iter_code_objects`); the result has one `AmdKernel`
per entry of the metadata note's `amdhsa.kernels`, in that order, with figures exactly as the
compiler wrote them, plus the kernel descriptor (`<name>.kd`) decoded as a cross-check.
Anything unreadable raises `CodeObjectError` naming `where` and the problem; nothing is guessed.

Formats: llvm.org/docs/AMDGPUUsage.html ("Code Object V3+ Metadata", "Kernel Descriptor").
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgpack  # type: ignore[import-untyped]  # msgpack ships no type information
from elftools.elf.elffile import ELFFile

from qualify.compile.offloadbundle import (
    ELF_ERRORS,
    EM_AMDGPU,
    CodeObjectBlob,
    CodeObjectError,
    iter_code_objects,
)

__all__ = ["AmdKernel", "CodeObjectError", "base_name", "iter_kernels", "read_code_object"]

ELFOSABI_AMDGPU_HSA = 64
# EI_ABIVERSION -> code object version (binutils include/elf/amdgpu.h). Read this byte, not
# `amdhsa.version`: LLVM 19 writes [1, 2] there for both V5 and V6.
_COV_BY_ABIVERSION = {1: 3, 2: 4, 3: 5, 4: 6}
NT_AMDGPU_METADATA = 32  # owner "AMDGPU", msgpack (V3+)
NT_AMD_HSA_METADATA = 10  # owner "AMD", YAML (V2): out of scope
KD_SIZE = 64
_SYM = struct.Struct("<IBBHQQ")  # Elf64_Sym: name, info, other, shndx, value, size
# Targets with FeatureGFX90AInsts encode VGPRs in granules of 8 even in wave64 (LLVM
# AMDGPUBaseInfo getVGPREncodingGranule); their VGPR count already includes the unified AGPRs.
_GRANULE8_WAVE64 = frozenset({"gfx90a", "gfx940", "gfx941", "gfx942", "gfx950", "gfx9-4-generic"})
_INTERN_SUFFIX = re.compile(r"\.intern\.[0-9a-fA-F]+$")


@dataclass(frozen=True)
class AmdKernel:
    """One kernel's metadata (keys without the leading dot, `-` as `_`) and its descriptor.

    `descriptor_*` come from the 64-byte kernel descriptor: `descriptor_vgpr_granules` is
    GRANULATED_WORKITEM_VGPR_COUNT + 1 (rsrc1 bits 5:0), i.e. allocated granules.
    """

    target: str
    name: str
    symbol: str
    vgpr_count: int
    sgpr_count: int
    agpr_count: int | None  # only targets with MAI instructions (gfx908, gfx90a, gfx94x)
    vgpr_spill_count: int
    sgpr_spill_count: int
    private_segment_fixed_size: int  # scratch bytes per lane
    group_segment_fixed_size: int  # LDS bytes per workgroup
    wavefront_size: int
    max_flat_workgroup_size: int
    uses_dynamic_stack: bool | None
    kernarg_segment_size: int
    code_object_version: int
    # V5+ on GFX10 and later: 1 = WGP mode (two CUs' LDS shared); absent on earlier targets.
    workgroup_processor_mode: bool | None
    reqd_workgroup_size: tuple[int, ...] | None
    descriptor_vgpr_granules: int
    descriptor_wave32: bool
    descriptor_dynamic_stack: bool
    descriptor_private_segment_size: int
    descriptor_group_segment_size: int

    @property
    def processor(self) -> str:
        """The processor of the target id, e.g. "gfx90a" for amdgcn-amd-amdhsa--gfx90a:xnack-."""
        return self.target.rsplit("--", 1)[-1].split(":", 1)[0]

    @property
    def vgpr_granule(self) -> int:
        """VGPR encoding granule of the descriptor: 8 for wave32 and gfx90a/gfx94x, else 4."""
        return 8 if self.descriptor_wave32 or self.processor in _GRANULE8_WAVE64 else 4

    def descriptor_mismatches(self) -> list[str]:
        """Why the descriptor disagrees with the metadata; empty when they agree."""
        problems = []
        capacity = self.descriptor_vgpr_granules * self.vgpr_granule
        if capacity < self.vgpr_count:
            problems.append(f"descriptor allocates {capacity} VGPRs < vgpr_count {self.vgpr_count}")
        if self.descriptor_private_segment_size != self.private_segment_fixed_size:
            problems.append(
                f"descriptor private segment {self.descriptor_private_segment_size} != "
                f"private_segment_fixed_size {self.private_segment_fixed_size}"
            )
        if self.descriptor_group_segment_size != self.group_segment_fixed_size:
            problems.append(
                f"descriptor group segment {self.descriptor_group_segment_size} != "
                f"group_segment_fixed_size {self.group_segment_fixed_size}"
            )
        if self.descriptor_wave32 != (self.wavefront_size == 32):
            problems.append(
                f"descriptor wave32={self.descriptor_wave32} but wavefront_size {self.wavefront_size}"
            )
        return problems

    @property
    def descriptor_consistent(self) -> bool:
        """True when the kernel descriptor agrees with the metadata (see descriptor_mismatches)."""
        return not self.descriptor_mismatches()


def base_name(name: str) -> str:
    """The kernel name to match across builds: without `.kd` and `.intern.<hex>`.

    `-fgpu-rdc` renames static and anonymous-namespace kernels to `<name>.intern.<hash>`, and
    the hash changes on every build, so names are compared without it.
    """
    if name.endswith(".kd"):
        name = name[: -len(".kd")]
    return _INTERN_SUFFIX.sub("", name)


def iter_kernels(data: bytes, origin: str = "") -> Iterator[tuple[CodeObjectBlob, AmdKernel]]:
    """Every kernel of every code object in `data` (any container iter_code_objects reads)."""
    for blob in iter_code_objects(data, origin):
        for kernel in read_code_object(blob.data, blob.source):
            yield blob, kernel


def read_code_object(data: bytes, where: str) -> list[AmdKernel]:
    """The kernels of one AMDGPU HSA code object; raises CodeObjectError naming `where`."""
    if not data.startswith(b"\x7fELF"):
        raise CodeObjectError(f"{where}: not an ELF file (no \\x7fELF magic)")
    if len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise CodeObjectError(f"{where}: not a little-endian ELF64 file, as code objects are")
    (machine,) = struct.unpack_from("<H", data, 18)
    if machine != EM_AMDGPU:
        raise CodeObjectError(f"{where}: ELF e_machine is {machine}, not {EM_AMDGPU} (EM_AMDGPU)")
    osabi, abiversion = data[7], data[8]
    if osabi != ELFOSABI_AMDGPU_HSA:
        raise CodeObjectError(f"{where}: EI_OSABI is {osabi}, not 64 (AMDGPU_HSA); PAL/Mesa are unsupported")
    if abiversion == 0:
        raise CodeObjectError(f"{where}: code object V2 (YAML metadata) is unsupported")
    if abiversion not in _COV_BY_ABIVERSION:
        raise CodeObjectError(f"{where}: EI_ABIVERSION {abiversion} is an unknown code object version")
    # All pyelftools reads happen here, so that its errors on a damaged file become ours.
    try:
        elf = ELFFile(io.BytesIO(data))
        notes = list(_notes(elf))
        symbols = _symbols(elf)
    except ELF_ERRORS as exc:
        raise CodeObjectError(f"{where}: malformed ELF file: {exc!r}") from exc
    payload = next((d for n, t, d in notes if n == b"AMDGPU" and t == NT_AMDGPU_METADATA), None)
    if payload is None:
        if any(n == b"AMD" and t == NT_AMD_HSA_METADATA for n, t, _ in notes):
            raise CodeObjectError(f"{where}: code object V2 (YAML metadata) is unsupported")
        raise CodeObjectError(f"{where}: no metadata note (owner AMDGPU, type 32)")
    try:
        meta = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:  # TypeError: unhashable keys
        raise CodeObjectError(f"{where}: metadata note is not valid msgpack: {exc}") from exc
    if not isinstance(meta, dict):
        raise CodeObjectError(f"{where}: metadata note is not a map")
    target = meta.get("amdhsa.target")
    entries = meta.get("amdhsa.kernels", [])
    if not isinstance(target, str) or not isinstance(entries, list):
        raise CodeObjectError(f"{where}: metadata lacks a string amdhsa.target or a list amdhsa.kernels")
    cov = _COV_BY_ABIVERSION[abiversion]
    kernels = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise CodeObjectError(f"{where}: amdhsa.kernels[{index}] is not a map")
        kernels.append(_kernel(entry, target, cov, data, symbols, f"{where} kernel #{index}"))
    return kernels


def _notes(elf: ELFFile) -> Iterator[tuple[bytes, int, bytes]]:
    """(owner, type, descriptor) of every note in SHT_NOTE sections, parsed from the raw bytes."""
    for section in elf.iter_sections():
        if section["sh_type"] != "SHT_NOTE":
            continue
        raw, pos = section.data(), 0
        align = 8 if section["sh_addralign"] == 8 else 4
        while pos + 12 <= len(raw):
            namesz, descsz, ntype = struct.unpack_from("<III", raw, pos)
            name_at = pos + 12
            # As LLVM's Elf_Nhdr: the name is padded to 4, header+name and descriptor to `align`.
            desc_at = pos + -(-(12 + -(-namesz // 4) * 4) // align) * align
            pos = desc_at + -(-descsz // align) * align
            if desc_at + descsz > len(raw):
                raise ValueError(f"note in section {section.name} runs past the section end")
            yield raw[name_at : name_at + namesz].rstrip(b"\0"), ntype, raw[desc_at : desc_at + descsz]


def _symbols(elf: ELFFile) -> dict[str, tuple[int, int]]:
    """Symbol name -> (file offset of its bytes, bytes left in its section), from .symtab and
    .dynsym (a stripped object keeps the dynamic one, which still exports every `<kernel>.kd`).
    Symbols without file bytes (undefined, absolute, in SHT_NOBITS) are left out.

    The tables are unpacked here rather than through pyelftools' per-symbol objects, which
    took three quarters of the reading time of a large fat binary."""
    sections = list(elf.iter_sections())
    headers = [(s["sh_type"], s["sh_addr"], s["sh_offset"], s["sh_size"]) for s in sections]
    found: dict[str, tuple[int, int]] = {}
    for section in sections:
        if section["sh_type"] not in ("SHT_SYMTAB", "SHT_DYNSYM"):
            continue
        table = section.data()
        strings = sections[section["sh_link"]].data()
        usable = len(table) - len(table) % _SYM.size
        for st_name, _info, _other, shndx, value, _size in _SYM.iter_unpack(table[:usable]):
            if not st_name or not 0 < shndx < len(headers):
                continue
            kind, address, offset, size = headers[shndx]
            start = value - address
            if kind == "SHT_NOBITS" or not 0 <= start <= size:
                continue
            end = strings.find(b"\0", st_name)
            name = strings[st_name : end if end >= 0 else len(strings)].decode("utf-8", "replace")
            found.setdefault(name, (offset + start, size - start))
    return found


def _descriptor(data: bytes, symbols: dict[str, tuple[int, int]], symbol: str, where: str) -> bytes:
    if symbol not in symbols:
        raise CodeObjectError(f"{where}: kernel descriptor symbol {symbol} not found")
    offset, available = symbols[symbol]
    if available < KD_SIZE or offset + KD_SIZE > len(data):
        raise CodeObjectError(f"{where}: kernel descriptor {symbol} has fewer than {KD_SIZE} bytes")
    return data[offset : offset + KD_SIZE]


def _kernel(
    entry: dict[str, Any],
    target: str,
    cov: int,
    data: bytes,
    symbols: dict[str, tuple[int, int]],
    where: str,
) -> AmdKernel:
    def value(
        key: str, kind: type[int] | type[bool] | type[str] | type[list[Any]], required: bool = True
    ) -> Any:
        item = entry.get(key)
        if item is None:
            if required:
                raise CodeObjectError(f"{where}: metadata key {key} is missing")
            return None
        # bool is a subclass of int in Python; a count that is true/false is a corrupt note.
        if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
            raise CodeObjectError(f"{where}: metadata key {key} is {item!r}, not {kind.__name__}")
        return item

    name = value(".name", str)
    where = f"{where} ({name})"
    symbol = value(".symbol", str)
    kd = _descriptor(data, symbols, symbol, where)
    group, private = struct.unpack_from("<II", kd, 0)
    (rsrc1,) = struct.unpack_from("<I", kd, 48)
    (properties,) = struct.unpack_from("<H", kd, 56)
    return AmdKernel(
        target=target,
        name=name,
        symbol=symbol,
        vgpr_count=value(".vgpr_count", int),
        sgpr_count=value(".sgpr_count", int),
        agpr_count=value(".agpr_count", int, required=False),
        vgpr_spill_count=value(".vgpr_spill_count", int),
        sgpr_spill_count=value(".sgpr_spill_count", int),
        private_segment_fixed_size=value(".private_segment_fixed_size", int),
        group_segment_fixed_size=value(".group_segment_fixed_size", int),
        wavefront_size=value(".wavefront_size", int),
        max_flat_workgroup_size=value(".max_flat_workgroup_size", int),
        uses_dynamic_stack=value(".uses_dynamic_stack", bool, required=False),
        kernarg_segment_size=value(".kernarg_segment_size", int),
        code_object_version=cov,
        workgroup_processor_mode=_flag(value(".workgroup_processor_mode", int, required=False)),
        reqd_workgroup_size=_dims(value(".reqd_workgroup_size", list, required=False), where),
        descriptor_vgpr_granules=(rsrc1 & 0x3F) + 1,
        descriptor_wave32=bool(properties & (1 << 10)),
        descriptor_dynamic_stack=bool(properties & (1 << 11)),
        descriptor_private_segment_size=private,
        descriptor_group_segment_size=group,
    )


def _flag(value: int | None) -> bool | None:
    return None if value is None else bool(value)


def _dims(value: list[Any] | None, where: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise CodeObjectError(f"{where}: metadata key .reqd_workgroup_size is {value!r}, not integers")
    return tuple(value)
