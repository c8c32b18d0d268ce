"""The seal of a run: the digest of every file a verdict derives from, authenticated, so that a
file changed by anything but qualify is found, and the stage it belongs to is never taken as
judged.

The commands a run starts are its own engine's. They run as another user in a namespace where
the run folder is read-only (`qualify.core.containment`), where the host gives that; the seal
holds on every host. qualify keeps, in memory for the whole run, the digest of each record it
writes (run, stage and check records, `note`) and of every file of a check's folder once the
check's commands have ended (`note_folder`: measurements, data, logs, whatever a judge or a
rejudgement reads), and compares the folder with them (`check`): after every check whose
commands could have written a record (`containment.reached_records`: no read-only mount, or
qualify's own user, or nix, or no cgroup), else as a stage saves its progress (about once a
second), at the end of each stage and at the end of the run: a difference stops the run and
names the file. A comparison reads every sealed file's inode, so one after every check of a
stage whose commands cannot write the records would make a check cost more the more came
before it (benchmarks/stage_scale.py). `seal.json` holds the same digests,
authenticated with qualify's key (`qualify.records.sealdoc`, `qualify.core.sealkey`); readers
(`stage_problem`) take a stage as judged only when every file of it is as sealed and the seal
verifies (see sealdoc for a seal of another host).

The seal is saved as each record is written (a check's records and files together, as the
check ends: `deferred`) and once more when the run's last process has ended
(`qualify.pipeline.runner` leaves `sealing` after `contained`).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from qualify.core import sealkey
from qualify.core.errors import QualifyError
from qualify.records.sealdoc import SEAL, SealDocument, SealState, Trust, root_of, state_of

__all__ = [
    "SEAL",
    "SealDocument",
    "SealState",
    "Tampered",
    "Trust",
    "check",
    "deferred",
    "digest",
    "measuring",
    "moved_aside",
    "note",
    "note_folder",
    "root_of",
    "run_problem",
    "sealing",
    "stage_problem",
    "state_of",
]

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
#: A folder of a stage's earlier attempts: sealed where it was moved, never part of the stage.
ATTEMPTS = "attempts"


class Tampered(QualifyError):
    """A record changed after qualify wrote it."""


#: Digests already read by this process, by the file's signature (`_signature`): a reader that
#: derives a verdict several times (a report, a set's members) reads each file once.
_read: dict[tuple[int, ...], str] = {}


def digest(path: Path) -> str | None:
    """The SHA-256 of the plain file `path` (None where it is missing, a link or not a plain
    file: a FIFO a command left is never opened for reading)."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        # Taken before the read: a change while it reads moves the change time, so the digest
        # stored under this signature is never taken for the file as it is after.
        signature = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if signature in _read:
            return _read[signature]
        hashed = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            hashed.update(chunk)
        _read[signature] = hashed.hexdigest()
        return _read[signature]
    except OSError:
        return None
    finally:
        os.close(fd)


def _signature(path: str | Path) -> tuple[int, ...] | None:
    """What changes whenever the file's content can have: its inode, size and times (the change
    time cannot be set back by a process)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def files(folder: Path, *, skip_attempts: bool = False) -> Iterator[Path]:
    """Every plain file below `folder` (links are not followed), its earlier attempts left out
    where `skip_attempts` (a stage's folder)."""
    for path, dirs, names, dirfd in os.fwalk(folder, follow_symlinks=False):
        if skip_attempts and Path(path) == folder and ATTEMPTS in dirs:
            dirs.remove(ATTEMPTS)
        for name in names:
            with suppress(OSError):
                if stat.S_ISREG(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode):
                    yield Path(path) / name


@dataclass
class _Seal:
    root: Path
    key: bytes | None
    #: Re-sign when saved: the seal read verified (or qualify makes it now).
    signs: bool
    digests: dict[str, str] = field(default_factory=dict)
    #: Files already changed when this attempt began (by key, as they were then): readers
    #: still see them as tampered, but no command of this attempt changed them.
    found: dict[str, str | None] = field(default_factory=dict)
    #: Each file's signature when its digest was taken: compared first, so that a run's seal
    #: check does not read every sealed byte again after every check.
    signatures: dict[str, tuple[int, ...] | None] = field(default_factory=dict)
    #: The seal as it was read, where it is kept unsigned (another host's, or broken).
    read_as: SealDocument | None = None
    #: How many `deferred` blocks are open: their notes are saved once, when the last ends.
    holding: int = 0
    pending: bool = False

    @staticmethod
    def in_run(root: Path) -> _Seal:
        """The seal a run's attempt keeps: the digests of the one on disk where it verifies,
        else none (what an earlier attempt wrote is then not vouched for: its stages read as
        not sealed until they run again)."""
        key = sealkey.load(create=True)
        state = state_of(root)
        seal = _Seal(root, key, True)
        if state.trust is Trust.VERIFIED and state.document is not None:
            seal.digests = dict(state.document.records)
        return seal

    @staticmethod
    def on_disk(root: Path) -> _Seal | None:
        """The seal a write outside a run (a rejudgement) updates, re-signed only where it
        verified: a seal of another host, or a broken one, never becomes this host's by it."""
        state = state_of(root)
        if state.document is None:
            return None
        seal = _Seal(root, sealkey.load(create=False), state.trust is Trust.VERIFIED)
        seal.digests = dict(state.document.records)
        seal.read_as = state.document
        return seal

    def key_of(self, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None

    def take(self, path: Path) -> None:
        key = self.key_of(path)
        if key is None or (value := digest(path)) is None:
            return
        self.digests[key] = value
        self.signatures[key] = _signature(path)
        self.found.pop(key, None)

    def take_folder(self, folder: Path) -> None:
        prefix = self.key_of(folder)
        if prefix is None:
            return
        for key in [k for k in self.digests if k.startswith(prefix + "/")]:
            del self.digests[key]
        for path in files(folder):
            self.take(path)

    def changed(self) -> None:
        """Save the seal now, or when the open `deferred` blocks end."""
        if self.holding:
            self.pending = True
        else:
            self.save()

    def save(self) -> None:
        from qualify.core.runstore import write_json  # the store writes records and notes them

        if self.signs and self.key is not None:
            document = SealDocument(self.digests).signed(self.key)
        elif self.read_as is not None:
            document = SealDocument(self.digests, self.read_as.key, self.read_as.mac, self.read_as.version)
        else:
            return
        write_json(self.root / SEAL, document.to_json(), version=document.version)

    def differences(self) -> list[str]:
        changed = []
        # Plain strings, not Paths: this runs after every check, over every file sealed so far.
        root = os.fspath(self.root) + os.sep
        for key, value in self.digests.items():
            path = root + key
            seen = self.signatures.get(key)
            if seen is not None and seen == _signature(path):
                continue
            now = digest(Path(path))
            if now != value and (key not in self.found or self.found[key] != now):
                changed.append(key)
            elif now == value:
                self.signatures[key] = _signature(path)
        return changed


_active: _Seal | None = None


@contextmanager
def sealing(root: Path) -> Iterator[None]:
    """Seal every record written inside the block under `root` (a run's or a set's folder); on
    leaving, compare the folder with what was written and save the seal."""
    global _active
    before, _active = _active, _Seal.in_run(root)
    _active.found = {key: digest(root / key) for key in _active.differences()}
    try:
        yield
    finally:
        seal, _active = _active, before
        seal.save()


def note(path: Path) -> None:
    """`path` (a record) was just written by qualify: its digest is the one to expect."""
    if _active is not None and _active.key_of(path) is not None:
        _active.take(path)
        _active.changed()
        return
    # Outside a run (a rejudgement): the run's seal on disk, when it has one, follows.
    root = root_of(path)
    if root is not None and (seal := _Seal.on_disk(root)) is not None:
        seal.take(path)
        seal.save()


def note_folder(folder: Path) -> None:
    """Every file of `folder` (a check's, once its commands have ended, and again once it is
    judged) is as qualify will read it: its digests are the ones to expect, and a file no
    longer there is no longer expected."""
    if _active is not None and _active.key_of(folder) is not None:
        _active.take_folder(folder)
        _active.changed()
        return
    root = root_of(folder)
    if root is not None and (seal := _Seal.on_disk(root)) is not None:
        seal.take_folder(folder)
        seal.save()


@contextmanager
def deferred() -> Iterator[None]:
    """Save the seal once, when the block ends, instead of at each note inside it: a check's
    folder, its result and its stage's record are sealed together as the check ends, so the seal
    (which holds every file of the run so far) is not written whole several times a check."""
    seal = _active
    if seal is None:
        yield
        return
    seal.holding += 1
    try:
        yield
    finally:
        seal.holding -= 1
        if not seal.holding and seal.pending:
            seal.pending = False
            seal.save()


def measuring(folder: Path) -> None:
    """`folder` (a check's) is about to be measured into: what was sealed there before (by an
    attempt whose folder is gone) is no longer expected; the measurement is sealed when it ends."""
    seal = _active
    prefix = seal.key_of(folder) if seal is not None else None
    if seal is None or prefix is None:
        return
    for key in [k for k in seal.digests if k.startswith(prefix + "/")]:
        del seal.digests[key]
        seal.signatures.pop(key, None)
        seal.found.pop(key, None)


def moved_aside(stage: Path, target: Path | None) -> None:
    """A stage's records moved by qualify under `target` (its `attempts/<n>/`, as
    `RunDir.move_to_attempts` does): their digests follow them."""
    seal = _active
    if seal is None or target is None:
        return
    old, new = seal.key_of(stage), seal.key_of(target)
    if old is None or new is None:
        return
    kept = f"{old}/{ATTEMPTS}/"
    for key in [k for k in seal.digests if k.startswith(old + "/") and not k.startswith(kept)]:
        moved = new + key[len(old) :]
        seal.digests[moved] = seal.digests.pop(key)
        seal.signatures.pop(key, None)
        if key in seal.found:
            seal.found[moved] = seal.found.pop(key)
    seal.changed()


def check() -> None:
    """Raise Tampered when a sealed file of the run in progress differs from what qualify wrote."""
    if _active is None:
        return
    changed = _active.differences()
    if changed:
        _active.save()  # the digests qualify knows, over any a command wrote
        raise Tampered(
            "tampered: changed after qualify wrote them, by a command of the run: "
            + ", ".join(str(_active.root / k) for k in changed),
            "the run stops here; its stages with changed records are never taken as judged. Find "
            "which command writes outside its own folder (its check's logs), or run where "
            "bubblewrap can make the run folder read-only to commands",
        )


def stage_problem(folder: Path, records: list[Path], run: Path) -> tuple[str | None, SealState]:
    """Why the stage in `folder` (of the run in `run`) cannot be taken as judged by its seal, or
    None; and the seal's state. Every file sealed under it must be as sealed, no file may have
    come since, and each of `records` (its stage.json and results) must be sealed."""
    root = root_of(folder, run if not (run.parent / "run.json").is_file() else run.parent)
    assert root is not None  # the run's folder is the last resort
    state = state_of(root)
    if state.trust is Trust.BROKEN:
        return f"not sealed: {state.why}", state
    if state.document is None:
        return None, state  # a run made elsewhere, before seals: nothing to compare
    sealed = state.document.records
    if not folder.resolve().is_relative_to(root.resolve()):
        return f"not sealed: {folder} leads out of {root}", state
    prefix = folder.resolve().relative_to(root.resolve()).as_posix() + "/"
    kept = prefix + ATTEMPTS + "/"
    mine = {k: v for k, v in sealed.items() if k.startswith(prefix) and not k.startswith(kept)}
    if not mine and any(p.is_file() for p in records):
        # Written by an attempt whose seal could not be vouched for, and kept since.
        return f"not sealed: no file of {folder} is in {root / SEAL}", state
    changed = [root / k for k, v in mine.items() if digest(root / k) != v]
    if state.document.version >= 2:
        changed += [p for p in files(folder, skip_attempts=True) if _key(root, p) not in mine]
    if changed:
        names = ", ".join(str(p) for p in sorted(set(changed)))
        return f"tampered: {names} changed after qualify sealed it", state
    unsealed = [p for p in records if p.is_file() and _key(root, p) not in mine]
    if unsealed:
        return f"not sealed: {', '.join(map(str, unsealed))} is not in {root / SEAL}", state
    return None, state


def run_problem(run: Path) -> tuple[str | None, SealState]:
    """Why the run in `run` (a run, a set, or a set's member) is not as sealed outside its
    stages (its run.json), or None; and its seal's state."""
    root = root_of(run / "run.json", run if not (run.parent / "run.json").is_file() else run.parent)
    assert root is not None  # the run's folder is the last resort
    state = state_of(root)
    if state.trust is Trust.BROKEN:
        return f"not sealed: {state.why}", state
    if state.document is None:
        return None, state
    record = run / "run.json"
    key = _key(root, record)
    expected = None if key is None else state.document.records.get(key)
    if expected is None:
        return f"not sealed: {record} is not in {root / SEAL}", state
    if digest(record) != expected:
        return f"tampered: {record} changed after qualify sealed it", state
    return None, state


def _key(root: Path, path: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None  # leads out of the sealed folder: never a sealed file
