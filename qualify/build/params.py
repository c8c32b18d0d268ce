"""The `nix-build` kind's parameters, declared once (`qualify.checks.kindparams`): the plan's
names, types, defaults, ranges and help, and the typed value `measure` and `judge` read them
through."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qualify.checks.kindparams import KindParams, param
from qualify.core.ranges import NON_NEGATIVE


@dataclass(frozen=True)
class BuildParams(KindParams):
    """A `nix-build` check's parameters."""

    toolchain: dict[str, Any] | None = param(None, help="component -> regex with a (?P<version>) group")
    single_version: tuple[str, ...] | None = param(None, help="components an arm may hold in one version")
    max_jobs: int | None = param(None, help="nix --max-jobs, the same for every arm", allowed=NON_NEGATIVE)
    cores: int | None = param(
        None, help="nix --cores, the same for every arm (0: every core)", allowed=NON_NEGATIVE
    )
    builders: str | None = param(
        None, help="nix's builders setting (remote builders; max_jobs = 0 builds on them alone)"
    )
    builders_use_substitutes: bool | None = param(None, help="let remote builders substitute")
    system: str | None = param(None, help="the system for input probes (default: this host's)")
    plan_cache: bool = param(
        True,
        help="substitute the arms from the plan's binary cache (its binary-cache check's cache, "
        "trusted by its public key) where this host has it",
    )
