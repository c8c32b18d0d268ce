"""The registry the spine looks check kinds up in.

The list of kinds lives above the stage packages (`qualify.kinds`), which installs it here, so
that the spine (`qualify.pipeline`) and this package never import a stage: a stage package
depends on the contract, never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from qualify.core.errors import ConfigError

if TYPE_CHECKING:
    # Named in types only: the CLI installs its loader here before any command runs, and
    # `qualify --version` or `--help` reads no kind.
    from qualify.checks.base import CheckKind, EvidenceTypes

_installed: dict[str, CheckKind] = {}
_loader: Callable[[], Iterable[CheckKind]] | None = None


def install_on_demand(loader: Callable[[], Iterable[CheckKind]]) -> None:
    """Install what `loader` returns when a kind is first needed (an entry point's choice, so
    that a command which needs no kind does not import every stage)."""
    global _loader  # noqa: PLW0603  (one registry per process, set by its entry point)
    _loader = loader


def install(kinds: Iterable[CheckKind]) -> None:
    """Make `kinds` the known kinds; installing the same list twice is harmless."""
    listed = list(kinds)
    names = [k.name for k in listed]
    if len(set(names)) != len(names):
        raise ValueError(f"check kinds named twice: {sorted(n for n in names if names.count(n) > 1)}")
    _installed.clear()
    _installed.update((k.name, k) for k in listed)


def installed() -> tuple[CheckKind, ...]:
    if not _installed and _loader is not None:
        install(_loader())
    if not _installed:
        # A programming error, not a user's: the entry point forgot qualify.kinds.install().
        raise RuntimeError("no check kinds are installed; call qualify.kinds.install() first")
    return tuple(_installed.values())


def kind_named(name: str, where: str) -> CheckKind:
    from qualify.core.tomlfile import suggest

    kinds = installed()
    for kind in kinds:
        if kind.name == name:
            return kind
    known = [k.name for k in kinds]
    raise ConfigError(
        f"{where}: unknown check kind {name!r}{suggest(name, known)}",
        "known kinds: " + ", ".join(known),
    )


def evidence_types(name: str) -> EvidenceTypes | None:
    """The types of kind `name`'s evidence; None when it has none, or is not a kind here (a
    result from a newer qualify, or no kinds installed: the core reading a report alone)."""
    if not _installed and _loader is None:
        return None
    kind = next((k for k in installed() if k.name == name), None)
    return None if kind is None else kind.evidence_types()
