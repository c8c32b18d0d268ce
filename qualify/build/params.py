"""The `nix-build` kind's parameters as a typed value (`qualify.checks.kindparams`): the names,
types and defaults `qualify.build.kind` declares, read by attribute."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qualify.checks.kindparams import KindParams


@dataclass(frozen=True)
class BuildParams(KindParams):
    """A `nix-build` check's parameters, as `KIND.params` declares them."""

    toolchain: dict[str, Any] | None = None
    single_version: tuple[str, ...] | None = None
    max_jobs: int | None = None
    cores: int | None = None
    builders: str | None = None
    builders_use_substitutes: bool | None = None
    system: str | None = None
