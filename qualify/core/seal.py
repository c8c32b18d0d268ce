"""The seal of a run's records: a digest of every record qualify wrote, so that a record changed
by anything else is found and the stage it belongs to is never taken as judged.

The commands a run starts are its own engine's, and where the host gives no mount namespace
(`qualify.core.containment`) they could write the run folder. qualify keeps, in memory for the
whole run, the digest of each record (run set, run, stage and check records) it writes, and
compares the folder with it after every check's commands ended and at the end of the run: a
difference stops the run and names the file. `seal.json` holds the same digests for every later
reader; a stage whose records differ from it is shown as tampered.

What the seal cannot see: a command that rewrote a record *and* seal.json consistently in an
attempt that was then killed before qualify compared them (the next attempt trusts the seal it
finds). The mount namespace leaves no such window; the README says which the host gave.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from qualify.core import jsontext
from qualify.core.errors import RUN_FOLDER_HINT, QualifyError, RunStoreError

SEAL = "seal.json"
#: How far above a record its run's seal may be: a check's folder in a stage, in a member, in a set.
_DEPTH = 5


class Tampered(QualifyError):
    """A record changed after qualify wrote it."""


def digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


@dataclass(frozen=True)
class SealDocument:
    """seal.json: the digest of each record qualify wrote, by its path under the seal's folder.
    A dataclass checked by hand: `qualify.core` stays below the evidence types."""

    records: dict[str, str]

    @staticmethod
    def read(document: object, where: str | Path) -> SealDocument:
        """`document` (as seal.json holds it, with the store's `schema_version`), refused naming
        the key that is missing, of the wrong type or not one qualify writes."""
        hint = "the seal was not written by qualify as it is"
        if not isinstance(document, dict):
            raise RunStoreError(f"{where}: the document is not an object", hint)
        for key in document:
            if key not in ("schema_version", "records"):
                raise RunStoreError(f"{where}: {key}: not a field this qualify knows", hint)
        if "records" not in document:
            raise RunStoreError(f"{where}: records: missing", hint)
        records = document["records"]
        if not isinstance(records, dict):
            raise RunStoreError(f"{where}: records is {type(records).__name__}, not an object", hint)
        for key, value in records.items():
            if not isinstance(value, str):
                raise RunStoreError(f"{where}: records.{key} is {type(value).__name__}, not a digest", hint)
        return SealDocument(dict(records))

    def to_json(self) -> dict[str, object]:
        return {"records": dict(sorted(self.records.items()))}


@dataclass
class _Seal:
    root: Path
    digests: dict[str, str] = field(default_factory=dict)
    #: Records already changed when this attempt began (by key, as they were then): readers
    #: still see them as tampered, but no command of this attempt changed them.
    found: dict[str, str | None] = field(default_factory=dict)

    @staticmethod
    def read(root: Path) -> _Seal:
        seal = _Seal(root)
        try:
            saved = SealDocument.read(jsontext.loads((root / SEAL).read_text(encoding="utf-8")), root / SEAL)
        except jsontext.TooDeep as exc:
            # Not a seal qualify wrote, and not one to pass over as empty: named, not a crash.
            raise RunStoreError(f"{root / SEAL}: unreadable: {exc}", RUN_FOLDER_HINT) from None
        except (OSError, ValueError, RunStoreError):
            return seal  # a seal that does not read holds no digest to compare with
        seal.digests = dict(saved.records)
        return seal

    def key(self, path: Path) -> str | None:
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return None

    def note(self, path: Path) -> None:
        key = self.key(path)
        if key is None or (value := digest(path)) is None:
            return
        self.digests[key] = value
        self.found.pop(key, None)
        self.save()

    def save(self) -> None:
        from qualify.core.runstore import write_json  # the store writes records and notes them

        write_json(self.root / SEAL, SealDocument(self.digests).to_json())

    def differences(self) -> list[str]:
        changed = []
        for key, value in self.digests.items():
            now = digest(self.root / key)
            if now != value and (key not in self.found or self.found[key] != now):
                changed.append(key)
        return changed


_active: _Seal | None = None


@contextmanager
def sealing(root: Path) -> Iterator[None]:
    """Seal every record written inside the block under `root` (a run's or a set's folder); on
    leaving, compare the folder with what was written and save the seal."""
    global _active
    before, _active = _active, _Seal.read(root)
    _active.found = {key: digest(root / key) for key in _active.differences()}
    try:
        yield
    finally:
        seal, _active = _active, before
        seal.save()


def note(path: Path) -> None:
    """`path` (a record) was just written by qualify: its digest is the one to expect."""
    if _active is not None and _active.key(path) is not None:
        _active.note(path)
        return
    # Outside a run (a rejudgement): the run's seal on disk, when it has one, follows. The
    # outermost is the run's (or its set's); one further in was not written by qualify.
    found = [folder for folder in list(path.parents)[:_DEPTH] if (folder / SEAL).is_file()]
    if found:
        _Seal.read(found[-1]).note(path)


def moved_aside(stage: Path, target: Path | None) -> None:
    """A stage's records moved by qualify under `target` (its `attempts/<n>/`, as
    `RunDir.move_to_attempts` does): their digests follow them."""
    seal = _active
    if seal is None or target is None:
        return
    old, new = seal.key(stage), seal.key(target)
    if old is None or new is None:
        return
    kept = f"{old}/attempts/"
    for key in [k for k in seal.digests if k.startswith(old + "/") and not k.startswith(kept)]:
        moved = new + key[len(old) :]
        seal.digests[moved] = seal.digests.pop(key)
        if key in seal.found:
            seal.found[moved] = seal.found.pop(key)
    seal.save()


def check() -> None:
    """Raise Tampered when a record of the run in progress differs from what qualify wrote."""
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


def tampered(records: list[Path]) -> list[Path]:
    """Which of `records` differ from their run's seal (none for a run sealed by no one)."""
    changed: list[Path] = []
    seals: dict[Path, _Seal] = {}
    for path in records:
        for folder in list(path.parents)[:_DEPTH]:
            if not (folder / SEAL).is_file():
                continue
            seal = seals.setdefault(folder, _Seal.read(folder))
            key = seal.key(path)
            if key is not None and key in seal.digests and digest(path) != seal.digests[key]:
                changed.append(path)
                break
    return changed
