"""The key that authenticates a run's seal and a runs directory's index: 32 random bytes kept in
qualify's state folder (`$XDG_STATE_HOME/qualify/seal.key`, else
`~/.local/state/qualify/seal.key`), made on first use, readable by qualify's user alone.

A digest anyone can compute again; an HMAC-SHA256 under this key only its holder can. The
checked commands run as another user (`qualify.core.commanduser`) and, under bubblewrap, see an
empty folder where the key's is, so they cannot read it. A seal made on another host names that
host's key by its id (the first 16 hex digits of the key's SHA-256): it is "not verifiable
here", never taken for one this host made.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from qualify.core.errors import QualifyError

ENV = "XDG_STATE_HOME"
KEY = "seal.key"
_SIZE = 32

_cached: dict[Path, bytes] = {}


def key_folder() -> Path:
    """The folder the key is kept in."""
    base = os.environ.get(ENV) or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return root / "qualify"


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def sign(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def verify(key: bytes, payload: bytes, mac: str) -> bool:
    return hmac.compare_digest(sign(key, payload), mac)


def _read(path: Path) -> bytes | None:
    """The key at `path`, when it is one qualify made: a plain file of this user's, no one
    else's to read or write (a key others could read authenticates nothing)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise QualifyError(f"{path}: cannot read the seal key: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise QualifyError(
                f"{path}: the seal key is not a file of this user's alone (mode {mode:o})",
                f"remove it (qualify makes a new one; runs sealed with it are then not verifiable "
                f"here), or `chmod 600 {path}` if only this user could ever read it",
            )
        key = os.read(fd, _SIZE + 1)
    finally:
        os.close(fd)
    if len(key) != _SIZE:
        raise QualifyError(f"{path}: the seal key is not {_SIZE} bytes", "remove it: qualify makes a new one")
    return key


def load(*, create: bool) -> bytes | None:
    """The key; made first where `create` and there is none (None where not, and none is there)."""
    folder = key_folder()
    path = folder / KEY
    if path in _cached:
        return _cached[path]
    key = _read(path)
    if key is None and create:
        key = _make(folder, path)
    if key is not None:
        _cached[path] = key
    return key


def _make(folder: Path, path: Path) -> bytes:
    """A new key, written whole under a temporary name and linked into place: two qualify
    processes starting at once end with one key, the first one linked."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        temp = folder / f".{KEY}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, secrets.token_bytes(_SIZE))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temp, path)
        except FileExistsError:
            pass  # another qualify made it first: its key is the one
        finally:
            temp.unlink()
    except OSError as exc:
        raise QualifyError(
            f"{folder}: cannot make the key that authenticates the run's seal: {exc.strerror or exc}",
            f"set {ENV} to a folder this user may write (the key must stay readable by it alone)",
        ) from None
    key = _read(path)
    assert key is not None  # linked above, by this process or another
    return key
