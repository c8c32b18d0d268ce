"""Check kinds, registered in one explicit list (no discovery, no import-time magic)."""

from __future__ import annotations

from qualify.checks import bench, command, kernelresources, kld, nixbuild, openaisuite, soak, tests
from qualify.checks.base import CheckKind
from qualify.errors import ConfigError
from qualify.tomlfile import suggest

KINDS: tuple[CheckKind, ...] = (
    nixbuild.KIND,
    command.KIND,
    tests.KIND,
    kernelresources.KIND,
    kld.KIND,
    openaisuite.KIND,
    soak.KIND,
    bench.KIND,
)


def kind_named(name: str, where: str) -> CheckKind:
    for kind in KINDS:
        if kind.name == name:
            return kind
    known = [k.name for k in KINDS]
    raise ConfigError(
        f"{where}: unknown check kind {name!r}{suggest(name, known)}",
        "known kinds: " + ", ".join(known),
    )
