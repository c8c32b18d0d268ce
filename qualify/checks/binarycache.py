"""The signed binary cache a plan names: a `binary-cache` check's parameters, and what makes a
file a nix signing key. Here, below the stages, because two read them: the distribution stage,
which fills the cache and proves it (`qualify.distribution.cache`), and the build stage, which
substitutes the arms from it where this host has it (`qualify.build.plancache`)."""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from qualify.checks.kindparams import KindParams, param

#: The kind whose parameters these are.
KIND = "binary-cache"


@dataclass(frozen=True)
class CacheParams(KindParams):
    """A `binary-cache` check's parameters."""

    cache: str = param(
        help="the binary cache folder (or file:// URL) to fill; a host's QUALIFY_CACHE replaces it"
    )
    secret_key_file: str = param(
        help="the nix secret key the cache is signed with (nix key generate-secret); never recorded; "
        "a host's QUALIFY_CACHE_SECRET_KEY_FILE replaces it"
    )
    public_key: str | None = param(
        None, help="the public key hosts trust the cache by (name:base64); none: the secret key's own"
    )
    closure: str = param("runtime", help="runtime, or build: the build-time closure too")
    compression: str = param("zstd", help="the NARs' compression: zstd, xz or none")

    def on_this_host(self, env: Mapping[str, str] | None = None) -> CacheParams:
        """These parameters with the cache folder and the secret key file this host's
        environment names (`CACHE_ENV`, `KEY_ENV`) in place of the plan's, each made absolute
        from where qualify was started."""
        env = os.environ if env is None else env
        given = {field: env.get(name, "").strip() for field, name in _HOST_ENV.items()}
        return replace(
            self,
            **{field: str(Path(value).expanduser().absolute()) for field, value in given.items() if value},
        )


#: Where this host keeps the cache and its key, when not where the plan says: a CI job writes the
#: key from a repository secret into its own temporary folder, never into the checkout, and
#: unpacks the cache another job filled where it likes. The host's, not the plan's: neither
#: changes what is qualified, and a plan (which the engine's repository may change) never
#: decides where a secret is read from on a host that sets these.
CACHE_ENV = "QUALIFY_CACHE"
KEY_ENV = "QUALIFY_CACHE_SECRET_KEY_FILE"
_HOST_ENV = {"cache": CACHE_ENV, "secret_key_file": KEY_ENV}


#: How to make a key pair, said wherever one is missing.
KEYGEN = (
    "make one: (umask 077 && nix key generate-secret --key-name NAME-1 > FILE) (keep it out of the "
    "repository), and give hosts its public half: nix key convert-secret-to-public < FILE"
)


def proves_only(params: CacheParams, key: Path) -> bool:
    """Whether this host proves a cache filled elsewhere rather than filling it: the secret key
    is not here and the plan gives the public key (a fleet host, trusting the cache by it)."""
    return params.public_key is not None and not key.exists()


def secret_key_problem(path: Path) -> str | None:
    """Why `path` is not a nix secret signing key (`name:base64` of 64 bytes) that only its owner
    may read, in words that never quote its contents; None when it is one. A key other users may
    read is refused as ssh refuses such a private key: checked commands run as another user
    (`nobody`) and must not be able to sign a cache the plan's hosts trust."""
    try:
        text = path.read_text(encoding="utf-8").strip()
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        return f"secret_key_file {path} does not exist; {KEYGEN}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"secret_key_file {path} cannot be read ({type(exc).__name__}); {KEYGEN}"
    if not key_bytes(text, 64):
        return f"secret_key_file {path} is not a nix secret key; {KEYGEN}"
    if mode & 0o077:
        return (
            f"secret_key_file {path} may be read by other users (mode {mode:04o}): chmod 600 {path}, "
            "so that no command of a run, which runs as another user, can read the key that signs the cache"
        )
    return None


#: Said where the key file is missing and the plan gives no public key to prove by.
_NO_PUBLIC_KEY = (
    "; a host that only reads the cache (filled where the key is) needs the check's public_key, "
    "the key it proves the cache by"
)


def key_problem(params: CacheParams, key: Path) -> str | None:
    """Why this host can neither fill the cache (with the secret key at `key`) nor prove one
    filled elsewhere (`proves_only`); None where it can do one of them."""
    if proves_only(params, key):
        return None
    problem = secret_key_problem(key)
    return None if problem is None else problem + ("" if key.exists() else _NO_PUBLIC_KEY)


def key_bytes(text: str, size: int) -> bool:
    """Whether `text` is `name:base64` of `size` bytes (64: a secret key, 32: a public one)."""
    name, colon, encoded = text.strip().partition(":")
    if not (name and colon and encoded):
        return False
    try:
        return len(base64.b64decode(encoded, validate=True)) == size
    except (binascii.Error, ValueError):
        return False
