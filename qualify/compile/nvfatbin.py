"""Find the CUDA cubins inside the files an nvcc build leaves behind.

Contract of `iter_cubins(data)`: it yields every cubin (ELF, e_machine 190) that `data` holds,
directly or nested, in file order, each with where it came from. It reads: a cubin itself;
fatbin containers (several back to back, as in a `.fatbin` file or a linked `.nv_fatbin`);
host ELF files (executables, `.so`, `.o`) through `.nv_fatbin`, and through `__nv_relfatbin`
in relocatable objects only; static archives. Entries compressed with LZ4 (block format) or
zstd are decompressed.

That is the set of cubins `cuobjdump` lists. A linked file keeps the relocatable images of its
`-rdc` objects in `__nv_relfatbin`, but they are not the code that runs (nvlink's output in
`.nv_fatbin` is), so there they are skipped, as cuobjdump skips them. PTX and NVVM IR (LTO)
entries carry no resource figures and are skipped. Input that holds no device code yields
nothing. Broken framing (truncated header, entry past its container, unknown container
version or entry kind, corrupt compressed data) raises `CubinError`, naming the place.

Each cubin of a host ELF's `.nv_fatbin` carries the source file (translation unit) it was
compiled from where the file says it (`qualify.compile.sourcefiles`); every other cubin, and one
whose source cannot be said, carries why not instead (`source_note`).

Formats (all little-endian): container header {u32 0xBA55ED50, u16 version 1, u16 header
size 16, u64 body size}; entry header {u16 kind (1 PTX, 2 cubin, 8 NVVM IR), u16 0x0101, u32
header size, u64 payload size, u32 compressed size @16, u32 @20, u16 minor @24, u16 major
@26, u32 sm @28, u32 name offset, u32 name length, u64 flags @40, u64 @48, u64 uncompressed
size @56}; flags 0x2000 = LZ4 block, 0x8000 = zstd frame. Checked against cuobjdump 13.5 on
nvcc 13.0 output; the toolkit's `fatbinary_section.h` names the host-side wrapper only.
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace

import lz4.block  # type: ignore[import-untyped]  # lz4 ships no type information
import zstandard
from elftools.elf.elffile import ELFFile

from qualify.compile.containers import (
    ARCHIVE_MAGIC,
    ELF_MAGIC,
    ArchiveError,
    archive_members,
    elf_machine,
    join_origin,
)
from qualify.compile.offloadbundle import ELF_ERRORS
from qualify.compile.sourcefiles import CUDA, SourceFiles, source_files, unknown

__all__ = ["EM_CUDA", "FATBIN_MAGIC", "CubinBlob", "CubinError", "is_cubin", "iter_cubins"]

EM_CUDA = 190
FATBIN_MAGIC = 0xBA55ED50
_FATBIN_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # 64 bytes; larger headers carry extra data after it
KIND_PTX, KIND_CUBIN, KIND_NVVM = 1, 2, 8
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
# A corrupt size field must not make us allocate without bound; real cubins are far smaller.
MAX_UNCOMPRESSED = 1 << 31
# LZ4 cannot expand input more than 255-fold (one literal-length byte encodes 255 bytes), so
# a larger claim is corrupt and is refused before lz4 allocates the output buffer.
_LZ4_MAX_RATIO = 255
MAX_DEPTH = 4  # archive > host ELF > fatbin > cubin is as deep as real files nest
_NONZERO = re.compile(rb"[^\0]")


class CubinError(ValueError):
    """A cubin or fatbin container is malformed or unsupported; the message says where."""


@dataclass(frozen=True)
class CubinBlob:
    """One cubin: where it came from, its ELF bytes (decompressed), and the fatbin entry's
    `sm` field (None for a cubin that was not inside a fatbin)."""

    source: str
    data: bytes
    entry_sm: int | None = None
    source_file: str | None = None
    source_note: str | None = None


#: Why a cubin found outside a host ELF's `.nv_fatbin` has no source file.
_ALONE = unknown("a cubin or fatbin outside a host ELF names no source file")
_RELOCATABLE = unknown("-rdc: relocatable device code (__nv_relfatbin) is not tied to source files")


def iter_cubins(data: bytes, origin: str = "") -> Iterator[CubinBlob]:
    """Yield the cubins in `data`; `origin` prefixes every `source` (e.g. a path)."""
    yield from _walk(data, origin, 0)


def is_cubin(data: bytes) -> bool:
    """True when `data` starts like an ELF file for EM_CUDA (either byte order)."""
    return elf_machine(data) == EM_CUDA


def _walk(data: bytes, origin: str, depth: int) -> Iterator[CubinBlob]:
    if depth > MAX_DEPTH:
        raise CubinError(f"{origin or 'input'}: containers nested deeper than {MAX_DEPTH} levels")
    if is_cubin(data):
        yield CubinBlob(origin or "cubin", data, source_note=_ALONE.reason)
    elif data.startswith(ELF_MAGIC):
        yield from _walk_host_elf(data, origin, depth)
    elif data.startswith(ARCHIVE_MAGIC):
        try:
            for name, body in archive_members(data):
                yield from _walk(body, join_origin(origin, f"member {name}"), depth + 1)
        except ArchiveError as exc:
            raise CubinError(f"{origin or 'input'}: {exc}") from exc
    elif data.startswith(_FATBIN_MAGIC_BYTES):
        yield from _walk_fatbin(data, origin or "fatbin", _ALONE)


def _walk_host_elf(data: bytes, origin: str, depth: int) -> Iterator[CubinBlob]:
    # All pyelftools reads happen here, so that its errors on a damaged file become ours.
    try:
        elf = ELFFile(io.BytesIO(data))
        relocatable = elf["e_type"] == "ET_REL"
        wanted = (".nv_fatbin", "__nv_relfatbin") if relocatable else (".nv_fatbin",)
        sections = [
            (s.name, s.data())
            for s in elf.iter_sections()
            if s.name in wanted and s["sh_type"] != "SHT_NOBITS"
        ]
        linked = any(name == ".nv_fatbin" for name, _ in sections)
        sources = source_files(elf, data, CUDA) if linked else _ALONE
    except ELF_ERRORS as exc:
        raise CubinError(f"{origin or 'input'}: malformed ELF file: {exc!r}") from exc
    for name, contents in sections:
        tied = sources if name == ".nv_fatbin" else _RELOCATABLE
        yield from _walk_fatbin(contents, join_origin(origin, f"section {name}"), tied)


def _walk_fatbin(data: bytes, where: str, sources: SourceFiles) -> Iterator[CubinBlob]:
    """Containers back to back; the linker may leave zero padding between them. Each
    container's cubins carry the source file `sources` names for its offset."""
    pos = 0
    while (found := _NONZERO.search(data, pos)) is not None:
        pos = found.start()
        if not data.startswith(_FATBIN_MAGIC_BYTES, pos):
            raise CubinError(f"{where} @0x{pos:x}: no fatbin container magic 0x{FATBIN_MAGIC:08X} here")
        if pos + _CONTAINER.size > len(data):
            raise CubinError(f"{where} @0x{pos:x}: fatbin container header is truncated")
        _magic, version, header_size, body_size = _CONTAINER.unpack_from(data, pos)
        if version != 1:
            raise CubinError(f"{where} @0x{pos:x}: fatbin container version {version} is unsupported")
        if header_size < _CONTAINER.size:
            raise CubinError(f"{where} @0x{pos:x}: fatbin container header size {header_size} < 16")
        end = pos + header_size + body_size
        if end > len(data):
            raise CubinError(
                f"{where} @0x{pos:x}: fatbin container of {body_size} bytes runs past the end "
                f"({len(data) - pos - header_size} bytes left)"
            )
        name, note = sources.of(pos)
        for blob in _container_entries(data, pos + header_size, end, f"{where} @0x{pos:x}"):
            yield replace(blob, source_file=name, source_note=note)
        pos = end


def _container_entries(data: bytes, pos: int, end: int, where: str) -> Iterator[CubinBlob]:
    while pos < end:
        if pos + _ENTRY.size > end:
            raise CubinError(f"{where}: entry header at 0x{pos:x} is truncated")
        kind, _, header_size, payload_size, compressed, _, _, _, sm, _, _, flags, _, uncompressed = (
            _ENTRY.unpack_from(data, pos)
        )
        entry = f"{where} entry @0x{pos:x}"
        start = pos + header_size
        if header_size < _ENTRY.size or start + payload_size > end:
            raise CubinError(
                f"{entry}: header size {header_size} and payload size {payload_size} run past the container"
            )
        pos = start + payload_size
        if kind in (KIND_PTX, KIND_NVVM):  # source and IR: no resource figures to read
            continue
        if kind != KIND_CUBIN:
            raise CubinError(f"{entry}: entry kind {kind} is unknown (1 PTX, 2 cubin, 8 NVVM IR)")
        payload = data[start:pos]
        method = flags & (FLAG_LZ4 | FLAG_ZSTD)
        label = f"sm_{sm}" + {0: "", FLAG_LZ4: " lz4", FLAG_ZSTD: " zstd"}.get(method, "")
        entry = f"{entry} {label}"
        if method:
            payload = _decompress(payload, method, compressed, uncompressed, entry)
        if not is_cubin(payload):
            raise CubinError(f"{entry}: cubin entry does not hold an ELF file for EM_CUDA ({EM_CUDA})")
        yield CubinBlob(entry, payload, sm)


def _decompress(payload: bytes, method: int, compressed: int, size: int, where: str) -> bytes:
    """The entry's compressed stream is its first `compressed` bytes; the rest is padding."""
    if method == FLAG_LZ4 | FLAG_ZSTD:
        raise CubinError(f"{where}: entry flags name both LZ4 and zstd compression")
    if not 0 < compressed <= len(payload):
        raise CubinError(f"{where}: compressed size {compressed} outside the payload of {len(payload)} bytes")
    if not 0 < size <= MAX_UNCOMPRESSED:
        raise CubinError(f"{where}: uncompressed size {size} is outside 1..{MAX_UNCOMPRESSED}")
    stream = payload[:compressed]
    try:
        if method == FLAG_LZ4:
            if size > _LZ4_MAX_RATIO * compressed + 64:
                raise CubinError(f"{where}: {compressed} LZ4 bytes cannot expand to {size} bytes")
            raw = bytes(lz4.block.decompress(stream, uncompressed_size=size))
        else:
            declared = zstandard.frame_content_size(stream)
            # A declared size must match: this bounds memory before anything is allocated.
            if declared not in (-1, size):
                raise CubinError(f"{where}: zstd frame holds {declared} bytes, entry header says {size}")
            # Without a declared size, max_output_size is the bound (and the buffer size).
            raw = zstandard.ZstdDecompressor().decompress(stream, max_output_size=size)
    except (lz4.block.LZ4BlockError, zstandard.ZstdError) as exc:
        raise CubinError(f"{where}: compressed data is corrupt: {exc}") from exc
    if len(raw) != size:
        raise CubinError(f"{where}: decompressed to {len(raw)} bytes, entry header says {size}")
    return raw
