"""A host's run archive unpacked for `qualify merge`, within caps.

An archive is outside input: a few kilobytes can stand for gigabytes (a zip of zeros, a tar
whose sparse member is all hole), and whatever it unpacks to is then copied again under the
fleet's folder. So before a byte is written, the archive's own listing is summed against three
caps, and the unpacking itself is counted as it goes:

- `MAX_UNPACKED_BYTES`, everything the archive holds together;
- `MAX_FILE_BYTES`, any one file;
- `MAX_FILES`, how many entries (files, folders, links) it holds.

A file counts by its length, not by the blocks it takes on disk: a sparse member of 16 GiB is
16 GiB here, since copying it under the fleet's folder writes every byte. The defaults are
sized to a real run: the largest file a run folder keeps is the numerics stage's reference
artifact (11.6 GB for the example's full profile), so one file may be 16 GiB and a whole run 32
GiB; `qualify merge --max-unpacked/--max-file/--max-files` change them.

Names are checked here, from the listing, before a byte is written, by tarfile's `data` filter's
rules: nothing absolute, nothing reaching out with `..`, no device or pipe, no link leading out,
nothing stored beneath a link. A zip is unpacked entry by entry by the same rules. A tar is
unpacked by tarfile with its `data` filter where this Python has one (3.11.4 and later); an
older 3.11 has none, so the checked members are written here: files and folders first, links
last, so that nothing is written through a link. Either way each link is then followed: one
leading out of the folder (through another link, which no name alone shows) refuses the archive.

A tar's hard link counts as the file it links to, each time: it costs nothing here, but the copy
under the fleet's folder writes it whole (a real run set keeps hard links: each member's
measurement seen from the set's own stage folder). An archive holding one name twice is refused:
which of the two is the run's would be a guess.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from qualify.core.errors import UsageError

GiB = 1 << 30
MAX_UNPACKED_BYTES = 32 * GiB
MAX_FILE_BYTES = 16 * GiB
MAX_FILES = 100_000

_CHUNK = 1 << 20
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True)
class Caps:
    """What one archive may unpack to."""

    total_bytes: int
    file_bytes: int
    files: int

    @staticmethod
    def default(
        total_bytes: int | None = None, file_bytes: int | None = None, files: int | None = None
    ) -> Caps:
        """The documented caps, each replaced where a value is given (read when called, so the
        module's constants are the one place they are set)."""
        return Caps(
            MAX_UNPACKED_BYTES if total_bytes is None else total_bytes,
            MAX_FILE_BYTES if file_bytes is None else file_bytes,
            MAX_FILES if files is None else files,
        )


def size_text(count: int) -> str:
    """A byte count as people read it: 16 GiB, 1.5 MiB, 512 bytes."""
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= factor:
            return f"{count / factor:.4g} {unit}"
    return f"{count} bytes"


def parse_size(text: str, option: str) -> int:
    """`16G`, `512MiB`, `1.5g`, `4096`: bytes (the units are binary: K is 1024)."""
    found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if found is None:
        raise UsageError(f"{option} {text!r}: not a size", "write it as bytes, or with K, M, G or T (16G)")
    value = int(float(found.group(1)) * _UNITS[found.group(2).upper()])
    if value < 1:
        raise UsageError(f"{option} {text!r}: must be at least one byte")
    return value


class _Tally:
    """Counts entries and bytes against the caps; the first one passed is an error that names
    the archive, the entry and the cap."""

    def __init__(self, archive: Path, caps: Caps) -> None:
        self.archive, self.caps = archive, caps
        self.files = 0
        self.total = 0

    def entry(self) -> None:
        self.files += 1
        if self.files > self.caps.files:
            self._refuse(f"holds more than {self.caps.files} entries, the cap on entries", "--max-files")

    def grow(self, name: str, size: int, now: int) -> None:
        """`name` is `now` bytes long (so far), `size` more of them than before."""
        if now > self.caps.file_bytes:
            self._refuse(
                f"{name!r} unpacks to {size_text(now)} ({now} bytes), over the cap on one file, "
                f"{size_text(self.caps.file_bytes)}",
                "--max-file",
            )
        self.total += size
        if self.total > self.caps.total_bytes:
            self._refuse(
                f"unpacks to more than {size_text(self.caps.total_bytes)}, the cap on one archive "
                f"({self.total} bytes by {name!r})",
                "--max-unpacked",
            )

    def _refuse(self, what: str, option: str) -> None:
        raise UsageError(
            f"{self.archive}: {what}; nothing of it was merged",
            f"an archive of a real run is smaller: check where it came from; if it is one, "
            f"`qualify merge {option} ...` raises the cap",
        )


def unpack(archive: Path, into: Path, caps: Caps) -> None:
    """Unpack `archive` (tar, compressed or not, or zip) into the empty folder `into`."""
    try:
        if archive.name.lower().endswith(".zip"):
            _unzip(archive, into, caps)
        else:
            _untar(archive, into, caps)
    except (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{archive}: cannot unpack: {exc}") from None
    except (NotImplementedError, RuntimeError) as exc:
        # zipfile's words for a compression it does not know and for an encrypted member.
        raise UsageError(
            f"{archive}: cannot unpack: {exc}",
            "archive the run folder again without encryption (zip -r, or tar -czf)",
        ) from None


def _untar(archive: Path, into: Path, caps: Caps) -> None:
    with tarfile.open(archive) as tar:
        members = _checked_members(archive, tar, _Tally(archive, caps))
        # The feature, not the version: the filter came in 3.11.4 (and to other branches'
        # security releases), and an older 3.11 refuses the argument.
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:
            _extract(archive, tar, members, into)
    _links_lead_inside(archive, members, into)


def _checked_members(archive: Path, tar: tarfile.TarFile, tally: _Tally) -> list[tarfile.TarInfo]:
    """Every member, its name and kind checked and its size counted against the caps. The
    headers are read first, all of them: a member's data is skipped, never stored, and a sparse
    member's size is its length (tarfile reports the expanded size)."""
    seen: dict[PurePosixPath, tarfile.TarInfo] = {}
    sizes: dict[PurePosixPath, int] = {}  # each file so far by its name: what a link to it writes
    for info in tar:
        tally.entry()
        name = _inside(archive, info.name)
        if not (info.isreg() or info.islnk() or info.isdir() or info.issym()):
            kind = _SPECIAL.get(info.type, "neither a file, a folder nor a link")
            raise UsageError(
                f"{archive}: {info.name!r} is {kind}; nothing of it was merged",
                "archive the run directory itself (tar -czf host.tgz -C runs RUN_ID)",
            )
        earlier = seen.setdefault(name, info)
        if earlier is not info and not (earlier.isdir() and info.isdir()):
            raise _twice(archive, info.name, earlier.size, info.size)
        if info.issym():
            _check_symlink(archive, info, name)
            continue
        if info.isdir():
            continue
        if info.islnk():
            # A hard link names a member before it (tarfile finds it the same way).
            found = sizes.get(_inside(archive, info.linkname))
            if found is None:
                raise UsageError(
                    f"{archive}: {info.name!r} links to {info.linkname!r}, which the archive "
                    "does not hold before it; nothing of it was merged",
                    "archive the run directory itself (tar -czf host.tgz -C runs RUN_ID)",
                )
            size = found
        else:
            size = info.size
        sizes[name] = size
        tally.grow(info.name, size, size)
    # A member beneath a link would be written wherever the link leads.
    links = {name for name, info in seen.items() if info.issym()}
    for name, info in seen.items():
        through = next((parent for parent in name.parents if parent in links), None)
        if through is not None:
            raise UsageError(
                f"{archive}: {info.name!r} lies beneath the link {seen[through].name!r}; "
                "nothing of it was merged",
                "archive the run directory itself (tar -czf host.tgz -C runs RUN_ID)",
            )
    return tar.getmembers()


_SPECIAL = {
    tarfile.CHRTYPE: "a character device",
    tarfile.BLKTYPE: "a block device",
    tarfile.FIFOTYPE: "a named pipe",
}


def _check_symlink(archive: Path, info: tarfile.TarInfo, name: PurePosixPath) -> None:
    """A link's target, read from where the link lies, must stay inside the folder (where it
    truly leads, through other links, is checked once they are all written)."""
    reached = posixpath.normpath(posixpath.join(name.parent.as_posix(), info.linkname))
    if not info.linkname or posixpath.isabs(info.linkname) or reached == ".." or reached.startswith("../"):
        raise _leads_out(archive, info)


def _leads_out(archive: Path, info: tarfile.TarInfo) -> UsageError:
    return UsageError(
        f"{archive}: {info.name!r} links to {info.linkname!r}, outside the archive; nothing of it was merged",
        "archive the run directory itself (tar -czf host.tgz -C runs RUN_ID), its links "
        "leading to files inside it",
    )


def _extract(archive: Path, tar: tarfile.TarFile, members: list[tarfile.TarInfo], into: Path) -> None:
    """What the `data` filter lets tarfile write, written here for a Python without it: the
    checked members, modes without set-id or group and other write bits, owners not restored."""
    links: list[tarfile.TarInfo] = []
    for info in members:
        target = into / _inside(archive, info.name)
        if info.isdir():
            target.mkdir(parents=True, exist_ok=True)
        elif info.issym():
            links.append(info)  # written last: until then no path here passes through a link
        elif info.islnk():
            target.parent.mkdir(parents=True, exist_ok=True)
            linked = into / _inside(archive, info.linkname)
            try:
                os.link(linked, target)
            except OSError:  # a file system without hard links: a copy reads the same
                shutil.copy2(linked, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(info)
            if source is None:  # only a member that is no file has no data; this one is a file
                raise tarfile.ExtractError(f"{info.name!r} has no data")
            with source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink, _CHUNK)
            target.chmod(_data_mode(info.mode))
            os.utime(target, (info.mtime, info.mtime))
    root = into.resolve()
    for info in links:
        target = into / _inside(archive, info.name)
        # Its folder is reached through links written before it only where the file system
        # folds case ("A" a link, "a/b" beneath it): it must still lie inside.
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.parent.resolve().is_relative_to(root):
            raise _leads_out(archive, info)
        target.symlink_to(info.linkname)


def _data_mode(mode: int) -> int:
    """A file's mode as the `data` filter sets it: no set-id, sticky, group or other write
    bits; executable only if its owner may run it; its owner may read and write it."""
    mode &= 0o755
    if not mode & 0o100:
        mode &= ~0o111
    return mode | 0o600


def _links_lead_inside(archive: Path, members: list[tarfile.TarInfo], into: Path) -> None:
    """Each link, followed on disk, ends inside `into`: a chain of links ("a" to ".", "b" to
    "a/..") leads out though each name alone stays in."""
    root = into.resolve()
    for info in members:
        if not info.issym():
            continue
        try:
            inside = (into / _inside(archive, info.name)).resolve().is_relative_to(root)
        except (OSError, RuntimeError):  # a loop of links leads nowhere
            inside = False
        if not inside:
            raise _leads_out(archive, info)


def _twice(archive: Path, name: str, first: int, second: int) -> UsageError:
    return UsageError(
        f"{archive}: holds {name!r} twice ({first} and {second} bytes); nothing of it was merged",
        "an archive of a run holds each file once: archive the run folder again "
        "(zip -r host.zip RUN_ID, or tar -czf host.tgz -C runs RUN_ID)",
    )


def _unzip(archive: Path, into: Path, caps: Caps) -> None:
    listed, written = _Tally(archive, caps), _Tally(archive, caps)
    with zipfile.ZipFile(archive) as zipped:
        entries = zipped.infolist()
        seen: dict[Path, zipfile.ZipInfo] = {}
        for info in entries:
            target = into / _inside(archive, info.filename)
            earlier = seen.setdefault(target, info)
            if earlier is not info and not (earlier.is_dir() and info.is_dir()):
                raise _twice(archive, info.filename, earlier.file_size, info.file_size)
            listed.entry()
            listed.grow(info.filename, info.file_size, info.file_size)
        # The listing is the archive's word; the bytes are counted again as they come out.
        for info in entries:
            target = into / _inside(archive, info.filename)
            written.entry()
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(info) as source, target.open("wb") as sink:
                length = 0
                while chunk := source.read(_CHUNK):
                    length += len(chunk)
                    written.grow(info.filename, len(chunk), length)
                    sink.write(chunk)


def _inside(archive: Path, name: str) -> PurePosixPath:
    """An entry's name as a path inside the folder it is unpacked in (`a/./b` is `a/b`); a name
    reaching outside it is refused, as tarfile's data filter refuses one."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise UsageError(
            f"{archive}: {name!r} points outside the archive", "archive the run directory itself"
        )
    return path
