"""Toolchain components read from an arm's build-time closure, and the mixed-toolchain gate.

Compilers are build-time dependencies, so components are matched against the derivation
names of the build closure (`nix-store -qR <drv>`), where no output suffix can confuse them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: Component -> a regex on the derivation name (no hash, no `.drv`) with a `version` group.
#: `-rocm` LLVM is keyed on its suffix: a closure can hold a plain clang and ROCm's clang.
DEFAULT_COMPONENTS: dict[str, str] = {
    "rocm-core": r"^rocm-core-(?P<version>\d.*)$",
    "rocm-runtime": r"^rocm-runtime-(?P<version>\d.*)$",
    "clr": r"^clr-(?P<version>\d.*)$",
    "hipcc": r"^hipcc-(?P<version>\d.*)$",
    "rocm-comgr": r"^rocm-comgr-(?P<version>\d.*)$",
    "rocm-device-libs": r"^rocm-device-libs-(?P<version>\d.*)$",
    "clang-rocm": r"^clang-(?P<version>\d[^-]*)-rocm$",
    "llvm-rocm": r"^llvm-(?P<version>\d[^-]*)-rocm$",
    "cuda_nvcc": r"^cuda_nvcc-(?P<version>\d.*)$",
    "cudatoolkit": r"^cudatoolkit-(?P<version>\d.*)$",
    "gcc": r"^gcc-(?P<version>\d[\d.]*)$",
    "clang": r"^clang-(?P<version>\d[\d.]*)$",
}

#: Components one arm may hold in one version only. gcc and clang legitimately appear twice
#: (a build compiler next to the one a runtime library was built with).
DEFAULT_SINGLE_VERSION = (
    "rocm-core",
    "rocm-runtime",
    "clr",
    "hipcc",
    "rocm-comgr",
    "rocm-device-libs",
    "clang-rocm",
    "llvm-rocm",
    "cuda_nvcc",
    "cudatoolkit",
)


@dataclass(frozen=True)
class Component:
    name: str
    pattern: re.Pattern[str]
    single_version: bool


def components(
    overrides: Mapping[str, str] | None = None, single_version: Iterable[str] | None = None
) -> list[Component]:
    patterns = {**DEFAULT_COMPONENTS, **(overrides or {})}
    single = set(DEFAULT_SINGLE_VERSION if single_version is None else single_version)
    out = []
    for name, pattern in patterns.items():
        compiled = re.compile(pattern)
        if "version" not in compiled.groupindex:
            raise ValueError(f"toolchain pattern for {name!r} has no (?P<version>...) group")
        out.append(Component(name, compiled, name in single))
    return out


def versions(names: Iterable[str], parts: list[Component]) -> dict[str, list[str]]:
    """Component -> sorted distinct versions found among derivation names."""
    found: dict[str, set[str]] = {}
    for name in names:
        for part in parts:
            match = part.pattern.match(name)
            if match:
                found.setdefault(part.name, set()).add(match.group("version"))
    return {k: sorted(v) for k, v in found.items()}


def mixed(found: Mapping[str, list[str]], parts: list[Component]) -> dict[str, list[str]]:
    """Single-version components that an arm holds in more than one version."""
    single = {p.name for p in parts if p.single_version}
    return {k: v for k, v in found.items() if k in single and len(v) > 1}
