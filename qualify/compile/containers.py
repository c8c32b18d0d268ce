"""What the AMDGPU and CUDA readers share: ELF and `ar` magic, an ELF's machine, the members of
a static archive, and how a nested place is named ("lib.a member x.o section .nv_fatbin").

`archive_members` yields GNU and BSD `ar` members as (name, body), with the symbol tables and
GNU's long-name table read or skipped as the format says; a damaged header or a member that runs
past the end raises `ArchiveError` with the offset, which each reader turns into its own error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

ELF_MAGIC = b"\x7fELF"
ARCHIVE_MAGIC = b"!<arch>\n"
_ARCHIVE_INDEXES = ("/", "/SYM64/", "__.SYMDEF", "__.SYMDEF SORTED")


class ArchiveError(ValueError):
    """A static archive's framing is damaged; the message gives the offset."""


def elf_machine(data: bytes) -> int | None:
    """The ELF header's e_machine (either byte order), or None when `data` is not ELF."""
    if len(data) < 20 or not data.startswith(ELF_MAGIC):
        return None
    order = "<" if data[5] == 1 else ">"
    machine: int = struct.unpack_from(order + "H", data, 18)[0]
    return machine


def join_origin(origin: str, part: str) -> str:
    """`origin` followed by `part`: how a place inside a container is named in messages."""
    return f"{origin} {part}" if origin else part


def archive_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """The members of the `ar` archive `data` (starting with ARCHIVE_MAGIC) as (name, body)."""
    pos, long_names = len(ARCHIVE_MAGIC), b""
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        try:
            if header[58:60] != b"`\n":
                raise ValueError("bad terminator")
            name, size = header[:16].decode("latin-1").rstrip(), int(header[48:58].decode().strip() or 0)
            if size < 0:
                raise ValueError("negative size")
        except ValueError as exc:
            raise ArchiveError(f"archive member header at offset 0x{pos:x} is corrupt") from exc
        body = data[pos + 60 : pos + 60 + size]
        if len(body) < size:
            raise ArchiveError(f"archive member at offset 0x{pos:x} runs past the end")
        pos += 60 + size + (size & 1)  # members are 2-byte aligned
        if name in _ARCHIVE_INDEXES:
            continue
        if name == "//":  # GNU table of long member names, "name/\n" each
            long_names = body
            continue
        if name.startswith("#1/") and name[3:].isdigit():  # BSD: the name precedes the body
            length = int(name[3:])
            name, body = body[:length].rstrip(b"\0").decode("utf-8", "replace"), body[length:]
        elif name.startswith("/") and name[1:].isdigit():
            first = int(name[1:])
            name = long_names[first : long_names.find(b"\n", first)].decode("utf-8", "replace")
        yield name.rstrip("/"), body
