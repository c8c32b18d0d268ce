"""What `qualify init` learned of an engine, for the compile stage's `kernel-resources` check.

`qualify.compile.enginedetect` finds it (from the build, else the sources); `qualify.scaffold`
writes the check from it. Kept apart from both so that neither depends on the other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

_FAMILY_WORDS = {"amdgpu": "AMDGPU", "cuda": "CUDA", "host": "host"}


def family_words(family: str) -> str:
    """How a kernel family is named in what qualify says: AMDGPU, CUDA, host."""
    return _FAMILY_WORDS.get(family, family)


def toml_strings(values: Sequence[str]) -> str:
    """A TOML array of basic strings (JSON's string escapes are TOML's)."""
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


@dataclass(frozen=True)
class EngineKind:
    """The kernels an engine's build holds, as far as could be learned, and from where."""

    #: What was found and where, in words ("found 4 CUDA kernels in /nix/store/…-engine (the
    #: flake's default package)", "no build found; the sources hold *.cu files").
    found: str
    #: GPU families found: the check requires them, so a build that silently lost its GPU code
    #: fails.
    require: tuple[str, ...] = ()
    #: The host function globs to write; None leaves the plan's default (a GPU build).
    host_patterns: tuple[str, ...] | None = None
    #: How `host_patterns` were chosen: "ggml" (ggml's kernel names matched the build's
    #: functions), "guessed" (the prefixes, suffixes or words its exported functions share),
    #: "default" (nothing to go by: ggml's, to be replaced); "" for a GPU build.
    patterns: str = ""
    #: GPU families the sources hold when they do not tell which one the build compiles: the
    #: check is written without `require`, saying to choose.
    either: tuple[str, ...] = ()
    #: Where else it looked, and why that gave nothing.
    notes: tuple[str, ...] = ()
    #: The programs the build holds (the names in its bin/ and libexec/), None when no build was
    #: found: `qualify init` writes stage files that call only what is there.
    tools: frozenset[str] | None = None
    #: The build holds a ctest tree (share/tests/CTestTestfile.cmake) for the operator tests.
    ctest: bool = False

    def noting(self, notes: Sequence[str]) -> EngineKind:
        return replace(self, notes=(*notes, *self.notes))

    def check_words(self) -> str:
        """What kernel check is written for it, in a phrase."""
        if self.require:
            families = " and ".join(family_words(f) for f in self.require)
            return f"a {families} kernel check (require = {toml_strings(self.require)})"
        if self.either:
            return "a kernel check without `require` (set it to the GPU family the build compiles)"
        assert self.host_patterns is not None
        shown = toml_strings(self.host_patterns)
        if self.patterns == "guessed":
            return f"a host kernel check with host_patterns = {shown} (guessed: check them)"
        if self.patterns == "ggml":
            return "a host kernel check with ggml's host_patterns"
        return "a host kernel check with ggml's host_patterns (replace them with the engine's kernel names)"
