"""The one list of check kinds, above the stage packages.

Explicit, in the default order of the stages (no discovery, no import-time magic): entry points
call `install()` once, and the spine then finds the kinds through `qualify.checks.registry`.
"""

from __future__ import annotations

from qualify.bench import kind as bench
from qualify.build import kind as build
from qualify.checks import command, registry, tests
from qualify.checks.base import CheckKind
from qualify.compile import kind as compile_
from qualify.numerics import kind as numerics
from qualify.serving import kind as serving
from qualify.soak import kind as soak

KINDS: tuple[CheckKind, ...] = (
    build.KIND,
    command.KIND,
    tests.KIND,
    compile_.KIND,
    numerics.KIND,
    serving.KIND,
    soak.KIND,
    bench.KIND,
)


def install() -> None:
    registry.install(KINDS)
