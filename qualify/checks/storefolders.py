"""The folders a plan names as binary caches (a `file://` URL or a path): where the distribution
stage's checks write a cache or a mirror, and where the build stage substitutes the arms from.
Each is taken with its placeholders filled, `~` expanded, and a relative path from the project.
Here, below the stages, because both read them.

Only local folders: a cache or mirror is made here and proved here, then served or synced by
whatever the project uses (an HTTP server, a bucket). A path must also be one nix reads back
from a store URL unchanged, so characters a URL would need to escape are refused by name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from qualify.core.config import ProjectConfig
from qualify.core.errors import PlaceholderError
from qualify.core.placeholders import Value, expand

#: What a folder a store URL names may hold: nix splits the URL at `?`, `&` and `#`.
_URL_SAFE = re.compile(r"[A-Za-z0-9._/+@:,=~-]+")


class PathProblem(ValueError):
    """A path a plan gives that this stage cannot use, and why."""


def resolved(value: str, values: Mapping[str, Value], root: Path) -> Path:
    """The folder or file `value` names: placeholders filled from `values` (a PlaceholderError
    when one is unknown), `file://` taken off, `~` expanded, relative to `root`."""
    text = value.strip()
    if "://" in text and not text.startswith("file://"):
        raise PathProblem(
            f"{value!r} is not a local folder: this stage writes a cache on this host and proves "
            "it from there (serve or sync that folder to share it)"
        )
    filled = expand([text.removeprefix("file://")], values)[0]
    path = Path(filled).expanduser()
    path = path if path.is_absolute() else root / path
    absolute = Path(os.path.normpath(path))
    if not _URL_SAFE.fullmatch(str(absolute)):
        raise PathProblem(
            f"{absolute} holds a character a store URL cannot carry unescaped (a blank, ?, &, #, %)"
        )
    return absolute


def store_url(folder: Path, **settings: str) -> str:
    """The `file://` store URL of `folder` with nix's store settings (`compression`,
    `secret-key`: a key file's path, never its contents)."""
    query = "&".join(f"{name}={value}" for name, value in settings.items())
    return f"file://{folder}" + (f"?{query}" if query else "")


def preflight_values(config: ProjectConfig) -> dict[str, Value]:
    """The placeholders a path can be filled from before a run exists: the project's folder and
    its variables (those that need the run, `{run_dir}`, `{out}`, are filled only when it runs)."""
    values: dict[str, Value] = {"project": str(config.root)}
    for name, value in config.vars.items():
        if isinstance(value, str):
            try:
                values[name] = expand([value], {"project": str(config.root)})[0]
            except PlaceholderError:
                continue
        else:
            values[name] = value
    return values


def preflight_path(value: str | None, config: ProjectConfig) -> Path | None:
    """`value` resolved as it will be when the check runs, or None where it cannot be yet (it
    names a placeholder of the run); a PathProblem for a path the stage cannot use."""
    if value is None:
        return None
    try:
        return resolved(value, preflight_values(config), config.root)
    except PlaceholderError:
        return None
