"""What an engine's source tree says about its kernels, when no build of it is at hand.

`*.cu`/`*.cuh` files are CUDA; `*.hip` files, or CMake or Make files that enable HIP, are AMDGPU;
anything else is taken for host code. The walk is bounded: hidden folders (.git, .venv),
`runs/`, `node_modules/` and links (a `result` out-link leads into the store) are skipped, and at
most `MAX_FILES` files are looked at, so `qualify init` stays quick in any checkout.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from qualify.compile.enginekind import EngineKind, family_words
from qualify.compile.params import DEFAULT_PATTERNS

MAX_FILES = 20_000
#: How much of a build file is read: the lines enabling a language come near the top.
_BUILD_FILE_BYTES = 256 * 1024
_SKIPPED = {"runs", "node_modules", "__pycache__", "venv"}
_CUDA = (".cu", ".cuh")
_BUILD_FILES = re.compile(r"^(CMakeLists\.txt|.*\.cmake|GNUmakefile|[Mm]akefile|.*\.mk)$")
#: What turns HIP on: CMake's HIP language or package, or hipcc / an offload target in a Makefile.
_HIP_ENABLED = re.compile(
    r"enable_language\s*\(\s*HIP\b|LANGUAGES\b[^)\n]*\bHIP\b|LANGUAGE\s+HIP\b|find_package\s*\(\s*hip\b"
    r"|\bhipcc\b|--offload-arch\b",
    re.IGNORECASE,
)


def from_sources(directory: Path) -> EngineKind:
    """The kernel check the sources under `directory` call for."""
    cuda: list[str] = []
    hip: list[str] = []
    looked = 0
    for dirpath, dirs, names in os.walk(directory):
        # os.walk does not follow links into folders; listed ones are dropped too, for clarity.
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in _SKIPPED and not Path(dirpath, d).is_symlink()
        )
        for name in sorted(names):
            if looked >= MAX_FILES:
                break
            looked += 1
            path = Path(dirpath, name)
            rel = path.relative_to(directory).as_posix()
            if name.endswith(_CUDA):
                cuda.append(rel)
            elif name.endswith(".hip") or (_BUILD_FILES.match(name) and _enables_hip(path)):
                hip.append(rel)
        if looked >= MAX_FILES:
            break
    where = f"the first {MAX_FILES} files under {directory}" if looked >= MAX_FILES else "the sources"
    found = []
    if cuda:
        found.append(f"*.cu files ({_some(cuda)})")
    if hip:
        found.append(f"HIP code ({_some(hip)})")
    held = " and ".join(found)
    families = tuple(f for f, files in (("amdgpu", hip), ("cuda", cuda)) if files)
    if len(families) == 1:
        return EngineKind(found=f"no build found; {where} hold {held}", require=families)
    if families:
        chosen = _named_by_flake(directory)
        if chosen:
            return EngineKind(
                found=f"no build found; {where} hold {held}, and flake.nix names {family_words(chosen)} only",
                require=(chosen,),
            )
        return EngineKind(found=f"no build found; {where} hold {held}", either=families)
    return EngineKind(
        found=f"no build found, and {where} hold no CUDA (*.cu) or HIP code",
        host_patterns=DEFAULT_PATTERNS,
        patterns="default",
    )


def _enables_hip(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            text = fh.read(_BUILD_FILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return _HIP_ENABLED.search(text) is not None


def _named_by_flake(directory: Path) -> str | None:
    """The one GPU family flake.nix names (`cuda…` for CUDA; `rocm…`, `hip…` for AMDGPU), when
    the sources hold both: a CUDA engine's source often builds for ROCm too, through HIP."""
    try:
        text = (directory / "flake.nix").read_text(encoding="utf-8", errors="replace").lower()
    except OSError:
        return None
    named = [
        f for f, words in (("amdgpu", ("rocm", "hip")), ("cuda", ("cuda",))) if any(w in text for w in words)
    ]
    return named[0] if len(named) == 1 else None


def _some(files: list[str]) -> str:
    """'a.cu, b.cu and 3 more'."""
    shown = ", ".join(files[:2])
    return shown + (f" and {len(files) - 2} more" if len(files) > 2 else "")
