"""Whether nix runs a flake's builders apart from qualify's user: a protection the run records.

A build runs the flake's own builders (shell scripts, compilers, the engine's build system): the
engine's commands, which qualify trusts no more than a check's. Where nix builds through a daemon
(a multi-user install), or as root with build users (`build-users-group`), each builder is a
build user of its own and cannot reach qualify's files. A single-user nix, or root's nix without
build users (Debian's nix-bin as qualify's README sets it up), runs every builder as qualify's user:
a hostile builder could read the seal key and write the run's records. The containment cannot
change that (nix must write its store), so the run says so where it says what else the host
could not give.

Contract of `builders_unprotected()`: the missing protection in words, or None where nix's
builders are apart from qualify's user or nix cannot say (not installed, an error). Read from
nix's own settings as it resolves them (`nix show-config --json`, or `nix config show --json`
where the first is gone), never from nix.conf by hand: `NIX_CONFIG`, the user's and the system's
files and the defaults all count. A plan's own nix options (`--nix-option`, a check's settings)
are not read: they apply to its build commands alone.
"""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qualify.core import process

#: The commands that print nix's settings as JSON, the older first (Nix 2.8 has only it; later
#: Nix keeps it as an alias for a while, Lix too).
SHOW_CONFIG = (("nix", "show-config", "--json"), ("nix", "config", "show", "--json"))
#: Seconds nix may take to print them.
TIMEOUT_S = 30


def builders_unprotected() -> str | None:
    """See the module (nix as qualify's environment finds it, which its builds inherit; a
    missing nix answers 127, as any command that cannot start)."""
    for argv in SHOW_CONFIG:
        code, out = process.host_capture(argv, timeout_s=TIMEOUT_S)
        if code == 0:
            try:
                settings = json.loads(out)
            except json.JSONDecodeError:
                return None
            return judged(settings, os.geteuid(), _store_writable())
    return None


def judged(settings: Mapping[str, Any], euid: int, store_writable: bool) -> str | None:
    """The missing protection, from nix's settings (`show-config --json`: each name's `value`),
    the user qualify runs as and whether it may write the store (nix's `auto` store builds
    through the daemon where it may not)."""
    store = str(_value(settings, "store") or "auto")
    if store == "daemon" or store.startswith("unix://"):
        return None
    if store == "auto" and euid != 0 and not store_writable:
        return None  # nix goes through the daemon, whose build users run the builders
    if store not in ("auto", "local") and not store.startswith(("/", "local?", "local://")):
        return None  # a remote store builds there, not as this user
    group = str(_value(settings, "build-users-group") or "")
    if euid == 0 and group:
        return None
    sandbox = _value(settings, "sandbox")
    sandboxed = sandbox is True or sandbox == "relaxed"
    why = "no build users" if euid == 0 else "a single-user nix"
    return (
        f"nix's builders apart from qualify's user (nix builds in this store as {_user_name(euid)}, "
        f"{why}{'' if sandboxed else ', no sandbox'}: a flake's builder can reach what that user can)"
    )


def _value(settings: Mapping[str, Any], name: str) -> Any:
    entry = settings.get(name)
    return entry.get("value") if isinstance(entry, Mapping) else entry


def _store_writable() -> bool:
    store = Path("/nix/store")
    return os.access(store, os.W_OK) if store.is_dir() else True


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
