"""Find the AMDGPU code objects inside the files a HIP/OpenCL build leaves behind.

Contract of `iter_code_objects(data)`: it yields every AMDGPU code object (ELF, e_machine 224)
that `data` holds, directly or nested, in file order, each with where it came from. It reads:
a code object itself; a clang offload bundle; a compressed bundle "CCOB" v1/v2/v3 (zlib or
zstd, MD5 checked); host ELF files (.o, executables, .so) through `.hip_fatbin`,
`.llvm.offloading` and `__CLANG_OFFLOAD_BUNDLE__<id>` sections; static archives.

Input that holds no device code (a host-only program, a text file, a thin archive) yields
nothing. Bitcode (`-fgpu-rdc` objects, `hip-` bundle entries, IR images) yields nothing: it
carries no resource figures. Broken framing (truncated header, entry past the end, hash
mismatch, unknown CCOB version or method) raises `CodeObjectError`, naming the place.

Each code object of a host ELF's `.hip_fatbin` carries the source file (translation unit) it
was compiled from where the file says it (`qualify.compile.sourcefiles`); every other code
object, and one whose source cannot be said, carries why not instead (`source_note`).

Formats: clang `OffloadBundler.cpp`, `OffloadBinary.h`, ROCm `hip_fatbin.h`.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

import zstandard
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from qualify.compile.containers import (
    ARCHIVE_MAGIC,
    ELF_MAGIC,
    ArchiveError,
    archive_members,
    elf_machine,
    join_origin,
)
from qualify.compile.sourcefiles import SourceFiles, source_files, unknown

EM_AMDGPU = 224
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
OFFLOAD_BINARY_MAGIC = b"\x10\xff\x10\xad"
# Raw bitcode and the bitcode wrapper (0x0B17C0DE, little-endian).
BITCODE_MAGICS = (b"BC\xc0\xde", b"\xde\xc0\x17\x0b")
FATBIN_ALIGN = 4096  # the HIP driver places one blob per translation unit on this boundary
HIPF_MAGIC = 0x48495046  # "HIPF", first word of each .hipFatBinSegment wrapper
# A corrupt size field must not make us allocate without bound; real bundles are far smaller.
MAX_UNCOMPRESSED = 1 << 32
MAX_DEPTH = 8  # containers nest at most archive > ELF > OffloadBinary > bundle in practice
_CCOB_METHODS = {0: "zlib", 1: "zstd"}  # llvm::compression::Format
_DEVICE_SECTIONS = (".hip_fatbin", ".hipFatBinSegment", ".llvm.offloading", BUNDLE_MAGIC.decode())
# What pyelftools raises on damaged files besides its own ELFError (found by fuzzing real files).
ELF_ERRORS = (ELFError, struct.error, ValueError, OverflowError, EOFError, IndexError, KeyError)


class CodeObjectError(ValueError):
    """A code object or offload container is malformed or unsupported; the message says where."""


@dataclass(frozen=True)
class CodeObjectBlob:
    """One AMDGPU code object: its bundle entry id (None outside bundles), origin, ELF bytes,
    and the source file it was compiled from, or why that is not known (`source_note`)."""

    bundle_id: str | None
    source: str
    data: bytes
    source_file: str | None = None
    source_note: str | None = None


#: Why a code object found outside a host ELF's `.hip_fatbin` has no source file.
_ALONE = unknown("a code object or bundle outside a host ELF names no source file")
_OFFLOADING = unknown("images of .llvm.offloading are not tied to source files")
_RDC_SECTION = unknown("-fgpu-rdc: a __CLANG_OFFLOAD_BUNDLE__ section names no source file")


def _tied(blobs: Iterable[CodeObjectBlob], sources: SourceFiles, start: int) -> Iterator[CodeObjectBlob]:
    """`blobs`, read from the blob at `start`, with its source file or why it is not known (a
    blob that a host ELF nested deeper already tied keeps its own)."""
    name, note = sources.of(start)
    for blob in blobs:
        yield blob if blob.source_file is not None else replace(blob, source_file=name, source_note=note)


def iter_code_objects(data: bytes, origin: str = "") -> Iterator[CodeObjectBlob]:
    """Yield the AMDGPU code objects in `data`; `origin` prefixes every `source` (e.g. a path)."""
    yield from _walk(data, origin, 0)


def is_amdgpu_elf(data: bytes) -> bool:
    """True when `data` starts like an ELF file for EM_AMDGPU (either byte order)."""
    return elf_machine(data) == EM_AMDGPU


def _unpack(fmt: str, data: bytes, offset: int, where: str) -> tuple[int, ...]:
    """struct.unpack_from that reports truncation as a CodeObjectError naming the offset."""
    need = struct.calcsize(fmt)
    if offset < 0 or offset + need > len(data):
        raise CodeObjectError(f"{where}: truncated: {need} bytes needed at offset 0x{offset:x}")
    return tuple(struct.unpack_from(fmt, data, offset))


def _walk(data: bytes, origin: str, depth: int) -> Iterator[CodeObjectBlob]:
    if depth > MAX_DEPTH:
        raise CodeObjectError(f"{origin or 'input'}: containers nested deeper than {MAX_DEPTH} levels")
    if is_amdgpu_elf(data):
        yield CodeObjectBlob(None, origin or "code object", data, source_note=_ALONE.reason)
    elif data.startswith(ELF_MAGIC):
        yield from _walk_host_elf(data, origin, depth)
    elif data.startswith(ARCHIVE_MAGIC):
        yield from _walk_archive(data, origin, depth)
    elif data.startswith((BUNDLE_MAGIC, CCOB_MAGIC)):
        yield from _walk_fatbin(data, origin, None, _ALONE)
    elif data.startswith(OFFLOAD_BINARY_MAGIC):
        yield from _walk_offload_binaries(data, origin, depth)


def _walk_fatbin(
    section: bytes, origin: str, starts: list[int] | None, sources: SourceFiles
) -> Iterator[CodeObjectBlob]:
    """Blobs at `starts`, or, without them, at 4096-aligned offsets past each blob's extent,
    each tied to the source file `sources` names for its offset.

    Skipping each blob's exact extent (bundle entries, the CCOB size field, or where the V1
    compressed stream ends) is what keeps "CCOB" bytes inside compressed data from matching.
    """
    if starts is not None:
        for start in starts:
            yield from _tied(
                _read_blob(section, start, join_origin(origin, f"@0x{start:x}"))[1], sources, start
            )
        return
    pos, found = 0, 0
    while pos < len(section):
        if section.startswith((BUNDLE_MAGIC, CCOB_MAGIC), pos):
            end, blobs = _read_blob(section, pos, join_origin(origin, f"@0x{pos:x}"))
            found += 1
            yield from _tied(blobs, sources, pos)
            pos = -(-max(end, pos + 1) // FATBIN_ALIGN) * FATBIN_ALIGN
        else:
            pos += FATBIN_ALIGN
    if not found and section.strip(b"\0"):
        raise CodeObjectError(f"{origin}: no offload bundle or CCOB at any 4096-aligned offset")


def _read_blob(data: bytes, start: int, where: str) -> tuple[int, list[CodeObjectBlob]]:
    """Parse the bundle or CCOB at `start`; return its end offset in `data` and its code objects."""
    if data.startswith(CCOB_MAGIC, start):
        end, raw, label = _decompress_ccob(data, start, where)
        if not raw.startswith(BUNDLE_MAGIC):
            raise CodeObjectError(f"{where}: {label} does not decompress to an offload bundle")
        return end, _parse_bundle(raw, 0, f"{where} {label}")[1]
    if data.startswith(BUNDLE_MAGIC, start):
        return _parse_bundle(data, start, where)
    raise CodeObjectError(f"{where}: neither an offload bundle nor a CCOB starts here")


def _parse_bundle(data: bytes, start: int, where: str) -> tuple[int, list[CodeObjectBlob]]:
    """Entries are {u64 offset from bundle start, u64 size, u64 id length, id}, little-endian."""
    (count,) = _unpack("<Q", data, start + len(BUNDLE_MAGIC), where)
    pos = end = start + len(BUNDLE_MAGIC) + 8
    if count > (len(data) - pos) // 24:
        raise CodeObjectError(f"{where}: bundle header claims {count} entries, more than fit")
    blobs: list[CodeObjectBlob] = []
    for _ in range(count):
        offset, size, id_len = _unpack("<QQQ", data, pos, where)
        if pos + 24 + id_len > len(data):
            raise CodeObjectError(f"{where}: bundle entry id at offset 0x{pos:x} runs past the end")
        bundle_id = data[pos + 24 : pos + 24 + id_len].decode("ascii", "replace")
        pos += 24 + id_len
        lo, hi = start + offset, start + offset + size
        if hi > len(data):
            raise CodeObjectError(
                f"{where}: entry {bundle_id} (offset 0x{offset:x}, size {size}) runs past the end"
            )
        end = max(end, hi, pos)
        payload = data[lo:hi]
        entry_where = f"{where} entry {bundle_id}"
        if is_amdgpu_elf(payload):
            blobs.append(CodeObjectBlob(bundle_id, entry_where, payload))
        elif size and "amdgcn" in bundle_id and not payload.startswith(BITCODE_MAGICS):
            raise CodeObjectError(f"{entry_where}: payload is neither a code object nor bitcode")
    return max(end, pos), blobs


def _decompress_ccob(data: bytes, start: int, where: str) -> tuple[int, bytes, str]:
    """Decompress the CCOB at `start`; return (end offset, bundle bytes, label like "CCOB v2 zstd")."""
    version, method = _unpack("<HH", data, start + 4, where)
    total: int | None
    if version == 1:
        (unc, digest), header, total = _unpack("<IQ", data, start + 8, where), 20, None
    elif version == 2:
        (total, unc, digest), header = _unpack("<IIQ", data, start + 8, where), 24
    elif version == 3:
        (total, unc, digest), header = _unpack("<QQQ", data, start + 8, where), 32
    else:
        raise CodeObjectError(f"{where}: CCOB version {version} is unsupported (known: 1, 2, 3)")
    if method not in _CCOB_METHODS:
        raise CodeObjectError(f"{where}: CCOB compression method {method} is unknown (0 zlib, 1 zstd)")
    label = f"CCOB v{version} {_CCOB_METHODS[method]}"
    if total is not None and (total < header or start + total > len(data)):
        raise CodeObjectError(f"{where}: {label} size field {total} runs past the end of the data")
    if unc > MAX_UNCOMPRESSED:
        raise CodeObjectError(f"{where}: {label} claims {unc} uncompressed bytes (limit {MAX_UNCOMPRESSED})")
    # V1 has no size field: its extent is where the compressed stream ends.
    payload = data[start + header : start + total] if total is not None else data[start + header :]
    raw, used = _decompress(method, payload, unc, f"{where}: {label}")
    if len(raw) != unc:
        raise CodeObjectError(f"{where}: {label} decompressed to {len(raw)} bytes, header says {unc}")
    # The header stores the low 64 bits of the bundle's MD5 (llvm::MD5::MD5Result::low()).
    computed = struct.unpack("<Q", hashlib.md5(raw, usedforsecurity=False).digest()[:8])[0]
    if computed != digest:
        raise CodeObjectError(
            f"{where}: {label} hash mismatch: header 0x{digest:016x}, decompressed data "
            f"0x{computed:016x} (the compressed bundle at offset 0x{start:x} is corrupt)"
        )
    return start + (total if total is not None else header + used), raw, label


def _decompress(method: int, payload: bytes, size: int, where: str) -> tuple[bytes, int]:
    """Decompress one stream of at most `size` bytes; return it and the input bytes it used."""
    try:
        if method == 0:
            zobj = zlib.decompressobj()
            raw = zobj.decompress(payload, size + 1)  # the +1 exposes streams longer than declared
            done, unused = zobj.eof, len(zobj.unused_data)
        else:
            declared = zstandard.frame_content_size(payload)
            # A declared size (LLVM always writes one) must match: this bounds memory up front.
            if declared not in (-1, size):
                raise CodeObjectError(f"{where}: zstd frame holds {declared} bytes, header says {size}")
            sobj = zstandard.ZstdDecompressor().decompressobj()
            raw = sobj.decompress(payload)
            done, unused = sobj.eof, len(sobj.unused_data)
    except (zlib.error, zstandard.ZstdError) as exc:
        raise CodeObjectError(f"{where}: compressed data is corrupt: {exc}") from exc
    if not done:
        raise CodeObjectError(f"{where}: compressed stream is truncated or longer than {size} bytes")
    return raw, len(payload) - unused


def _walk_host_elf(data: bytes, origin: str, depth: int) -> Iterator[CodeObjectBlob]:
    # All pyelftools reads happen here, so that its errors on a damaged file become ours.
    try:
        elf = ELFFile(io.BytesIO(data))
        sections = [
            (s.name, s["sh_addr"], s.data())
            for s in elf.iter_sections()
            if s["sh_type"] != "SHT_NOBITS" and s.name.startswith(_DEVICE_SECTIONS)
        ]
        # Relocatable objects keep the wrapper pointers in relocations: see _wrapper_starts.
        order = "" if elf.elfclass != 64 or elf["e_type"] == "ET_REL" else "<>"[not elf.little_endian]
        has_fatbin = any(name == ".hip_fatbin" for name, _, _ in sections)
        sources = source_files(elf, data) if has_fatbin else _ALONE
    except ELF_ERRORS as exc:
        raise CodeObjectError(f"{origin or 'input'}: malformed ELF file: {exc!r}") from exc
    for name, address, contents in sections:
        if name == ".hip_fatbin":
            segment = next((c for n, _, c in sections if n == ".hipFatBinSegment"), b"")
            starts = _wrapper_starts(segment, order, address, contents)
            yield from _walk_fatbin(contents, join_origin(origin, "section .hip_fatbin"), starts, sources)
        elif name == ".llvm.offloading":
            where = join_origin(origin, "section .llvm.offloading")
            yield from _tied(_walk_offload_binaries(contents, where, depth + 1), _OFFLOADING, 0)
        elif name.startswith(BUNDLE_MAGIC.decode()) and is_amdgpu_elf(contents):
            # The old driver's -fgpu-rdc objects: one section per entry, normally bitcode.
            entry = CodeObjectBlob(
                name[len(BUNDLE_MAGIC) :], join_origin(origin, f"section {name}"), contents
            )
            yield from _tied([entry], _RDC_SECTION, 0)


def _wrapper_starts(segment: bytes, order: str, base: int, fatbin: bytes) -> list[int] | None:
    """Blob offsets from the `.hipFatBinSegment` wrappers {u32 "HIPF", u32 1, u64 ptr, u64}.

    Returns None (scan instead) unless every pointer is stored in place and lands on a bundle or
    CCOB. lld and relocatable objects leave the pointer to a relocation; resolving those would
    mean iterating every relocation in Python, and the scan finds the same blobs.
    `order` is the struct byte order of a 64-bit linked file, or "" when wrappers can't be used.
    """
    if not order:
        return None
    starts: set[int] = set()
    for index in range(len(segment) // 24):
        magic, _version, pointer = struct.unpack_from(order + "IIQ", segment, index * 24)
        offset = pointer - base
        if magic != HIPF_MAGIC or not 0 <= offset < len(fatbin):
            return None
        if not fatbin.startswith((BUNDLE_MAGIC, CCOB_MAGIC), offset):
            return None
        starts.add(offset)  # -fgpu-rdc: every TU's wrapper points at the one linked blob
    return sorted(starts) or None


def _walk_archive(data: bytes, origin: str, depth: int) -> Iterator[CodeObjectBlob]:
    """GNU/BSD `ar` members, each walked as a file; symbol tables are skipped."""
    try:
        for name, body in archive_members(data):
            yield from _walk(body, join_origin(origin, f"member {name}"), depth + 1)
    except ArchiveError as exc:
        raise CodeObjectError(f"{origin or 'input'}: {exc}") from exc


def _walk_offload_binaries(data: bytes, origin: str, depth: int) -> Iterator[CodeObjectBlob]:
    """OffloadBinary records (ClangOffloadPackager.rst): a 32-byte header {magic, u32 version,
    u64 size, u64 entry offset, u64 entry size}, 40-byte entries {u16 image kind, u16 offload
    kind, u32 flags, u64 string offset, u64 string count, u64 image offset, u64 image size}.
    Images are walked by content, not by their declared kind: ELF code objects are yielded."""
    pos = 0
    while pos < len(data):
        if data[pos] == 0:  # linker alignment padding between records
            pos += 1
            continue
        if not data.startswith(OFFLOAD_BINARY_MAGIC, pos):
            raise CodeObjectError(f"{origin or 'input'}: no OffloadBinary magic at offset 0x{pos:x}")
        version, size, entry_off, entry_size = _unpack("<IQQQ", data, pos + 4, origin or "input")
        if version != 1:
            raise CodeObjectError(
                f"{origin or 'input'}: OffloadBinary version {version} at 0x{pos:x} is unsupported"
            )
        if size < 32 or pos + size > len(data):
            raise CodeObjectError(
                f"{origin or 'input'}: OffloadBinary at 0x{pos:x} claims {size} bytes, past the end"
            )
        record = data[pos : pos + size]
        for index in range(entry_size // 40):  # LLVM writes one entry; more cost nothing to allow
            _kinds, _flags, str_off, n_str, img_off, img_size = _unpack(
                "<IIQQQQ", record, entry_off + 40 * index, origin
            )
            strings = _string_map(record, str_off, n_str, f"{origin} @0x{pos:x}")
            if img_off + img_size > len(record):
                raise CodeObjectError(
                    f"{origin or 'input'}: OffloadBinary image at 0x{pos:x} runs past its record"
                )
            label = f"@0x{pos:x} image {strings.get('triple', '?')} {strings.get('arch', '?')}"
            yield from _walk(record[img_off : img_off + img_size], join_origin(origin, label), depth + 1)
        pos += size


def _string_map(record: bytes, offset: int, count: int, where: str) -> dict[str, str]:
    """The {u64 key offset, u64 value offset} table of NUL-terminated strings."""
    result: dict[str, str] = {}
    for index in range(count):
        key_off, value_off = _unpack("<QQ", record, offset + 16 * index, where)
        result[_cstring(record, key_off, where)] = _cstring(record, value_off, where)
    return result


def _cstring(record: bytes, offset: int, where: str) -> str:
    end = record.find(b"\0", offset)
    if offset >= len(record) or end < 0:
        raise CodeObjectError(f"{where}: OffloadBinary string at 0x{offset:x} is not NUL-terminated")
    return record[offset:end].decode("utf-8", "replace")
