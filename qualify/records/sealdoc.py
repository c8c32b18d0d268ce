"""seal.json, as qualify writes it and as every reader checks it.

    {"schema_version": 2, "key": "<key id>", "records": {"<path>": "<sha256>", ...}, "mac": "<hmac>"}

`records` holds the digest of every file a verdict derives from (run.json, each stage.json and
result.json, and every file of each check's folder: measurements, data, logs), by its path
under the sealed folder (a run's, or a set's). `mac` is HMAC-SHA256 of the key id and the
records under qualify's key (`qualify.core.sealkey`): anyone can recompute a digest, no one
without the key can make the seal agree with it.

How a reader takes a seal (`state_of`):
- verified: made with this host's key, and the MAC holds: the digests are the ones qualify wrote.
- broken: seal.json empty, malformed, or made with this host's key and not authentic; or missing
  where the run is one this runs directory made (`qualify.core.runindex`): nothing in the
  folder is taken as judged ("not sealed").
- elsewhere: made with another host's key, or by a qualify that did not authenticate seals
  (version 1), or missing from a run not made here: its digests still find a change, but who
  wrote them cannot be checked here ("not verifiable here"); such a run is never shown as
  QUALIFIED by a reader of this host, and a fleet merge names it for each host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from qualify.core import jsontext, runindex, sealkey
from qualify.core.errors import RUN_FOLDER_HINT, RunStoreError

SEAL = "seal.json"
VERSION = 2
#: How far above a record its run's seal may be: a check's folder in a stage, in a member, in a set.
DEPTH = 5


@dataclass(frozen=True)
class SealDocument:
    """seal.json as read: its digests, the id of the key it was made with and its MAC (none in
    a version 1 seal). A dataclass checked by hand: `qualify.core` stays below the evidence types."""

    records: dict[str, str]
    key: str | None = None
    mac: str | None = None
    version: int = VERSION

    @staticmethod
    def read(document: object, where: str | Path) -> SealDocument:
        """`document` (as seal.json holds it), refused naming the key that is missing, of the
        wrong type or not one qualify writes."""
        hint = "the seal was not written by qualify as it is"
        if not isinstance(document, dict):
            raise RunStoreError(f"{where}: the document is not an object", hint)
        for key in document:
            if key not in ("schema_version", "records", "key", "mac"):
                raise RunStoreError(f"{where}: {key}: not a field this qualify knows", hint)
        if "records" not in document:
            raise RunStoreError(f"{where}: records is missing", hint)
        records = document["records"]
        if not isinstance(records, dict):
            raise RunStoreError(f"{where}: records is {type(records).__name__}, not an object", hint)
        for key, value in records.items():
            if not isinstance(value, str):
                raise RunStoreError(f"{where}: records.{key} is {type(value).__name__}, not a digest", hint)
        for field in ("key", "mac"):
            if field in document and not isinstance(document[field], str):
                raise RunStoreError(f"{where}: {field} is {type(document[field]).__name__}, not text", hint)
        version = document.get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
            raise RunStoreError(f"{where}: schema_version {version!r} is not one this qualify reads", hint)
        return SealDocument(dict(records), document.get("key"), document.get("mac"), version)

    def payload(self) -> bytes:
        return json.dumps(
            {"key": self.key, "records": self.records}, sort_keys=True, separators=(",", ":")
        ).encode()

    def signed(self, key: bytes) -> SealDocument:
        named = SealDocument(dict(self.records), sealkey.key_id(key))
        return SealDocument(named.records, named.key, sealkey.sign(key, named.payload()))

    def to_json(self) -> dict[str, object]:
        document: dict[str, object] = {"records": dict(sorted(self.records.items()))}
        if self.key is not None and self.mac is not None:
            document = {"key": self.key, **document, "mac": self.mac}
        return document


class Trust(Enum):
    VERIFIED = "verified"
    BROKEN = "broken"
    ELSEWHERE = "elsewhere"


@dataclass(frozen=True)
class SealState:
    """A sealed folder's seal as a reader takes it: how far it is trusted, and why not."""

    root: Path
    trust: Trust
    document: SealDocument | None
    why: str = ""

    @property
    def words(self) -> str:
        """How the seal reads, for a reader's line ("not sealed: ...", "not verifiable here: ...")."""
        if self.trust is Trust.VERIFIED:
            return "sealed and verified"
        head = "not sealed" if self.trust is Trust.BROKEN else "seal not verifiable here"
        return f"{head}: {self.why}"


def root_of(path: Path, run: Path | None = None) -> Path | None:
    """The sealed folder `path` belongs to: the outermost folder holding seal.json among its
    parents (a set's, over its member's); where none does, `run` (the run being read) when given."""
    found = [folder for folder in list(path.parents)[:DEPTH] if (folder / SEAL).is_file()]
    if path.is_dir() and (path / SEAL).is_file():
        found.insert(0, path)
    return found[-1] if found else run


def _made_here(root: Path) -> bool:
    """Whether the run (or the set) in `root` is one its runs directory lists as made here."""
    return root.name in runindex.read(root.parent).runs


def state_of(root: Path) -> SealState:
    """How the seal of the folder `root` reads on this host (see the module's docstring)."""
    path = root / SEAL
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        if _made_here(root):
            return SealState(root, Trust.BROKEN, None, f"{path} is missing")
        return SealState(root, Trust.ELSEWHERE, None, f"no {SEAL} (a run not made in this runs directory)")
    except OSError as exc:
        return SealState(root, Trust.BROKEN, None, f"{path}: unreadable: {exc.strerror or exc}")
    try:
        document = SealDocument.read(jsontext.loads(text), path)
    except jsontext.TooDeep as exc:
        # Not a seal qualify wrote, and not one to pass over as broken: named, as any record.
        raise RunStoreError(f"{path}: unreadable: {exc}", RUN_FOLDER_HINT) from None
    except RunStoreError as exc:
        return SealState(root, Trust.BROKEN, None, exc.message)
    except ValueError as exc:
        return SealState(root, Trust.BROKEN, None, f"{path}: unreadable: {exc}")
    key = sealkey.load(create=False)
    if document.version < VERSION or document.mac is None or document.key is None:
        if _made_here(root):
            return SealState(root, Trust.BROKEN, document, f"{path} is not authenticated")
        return SealState(
            root, Trust.ELSEWHERE, document, f"its {SEAL} was written before seals were authenticated"
        )
    if key is None or document.key != sealkey.key_id(key):
        if _made_here(root):
            return SealState(
                root, Trust.BROKEN, document, f"{path} names a key this host did not make it with"
            )
        return SealState(root, Trust.ELSEWHERE, document, f"its {SEAL} was made with another host's key")
    if not sealkey.verify(key, document.payload(), document.mac):
        return SealState(
            root, Trust.BROKEN, document, f"{path} is not authentic (changed since qualify wrote it)"
        )
    return SealState(root, Trust.VERIFIED, document)
