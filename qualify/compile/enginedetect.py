"""What kind of engine a project builds, for `qualify init` to write a kernel check that fits it.

The compile stage's `kernel-resources` check finds AMDGPU code objects and CUDA cubins by
themsbinaries, but host kernels only by name (`host_patterns`, ggml's by default): an engine that is
neither ggml nor GPU code would fail "no kernels found" with nothing said about what to change.
So `detect` looks, in this order, at:

1. the engine's build: the flake's default package when it is already in the nix store (asked of
   nix offline, without building, within a time limit), else the project's `result*` out-links;
   read by the same scanner the check uses (`qualify.compile.scan`): GPU code objects, else host
   functions named like ggml's kernels, else the prefixes, suffixes or words most of its exported
   functions share;
2. without a build (or with one holding no code), the source tree (`qualify.compile.enginesources`).

It never builds and never fails: whatever it cannot learn is a note, and the answer falls back
to the default plan's check with a comment saying what to edit.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qualify.compile.containers import ELF_MAGIC
from qualify.compile.enginekind import EngineKind, family_words
from qualify.compile.enginesources import from_sources
from qualify.compile.params import DEFAULT_PATTERNS
from qualify.core.process import capture

#: How long nix may take to evaluate the flake's default package: a flake whose inputs are all
#: in the store evaluates in seconds; one that would fetch fails at once offline.
NIX_TIMEOUT_S = 90.0
_NIX = ["nix", "--extra-experimental-features", "nix-command flakes"]
#: Nix never builds or downloads for `init`: offline, no lock file written, no derivation built
#: during evaluation (import from derivation).
_NIX_QUIET = ["--offline", "--no-write-lock-file", "--option", "allow-import-from-derivation", "false"]
#: A C name's prefix up to its first underscore (`ck_gemm` → `ck_`), and a C++ name's first
#: namespace as Itanium mangling spells it (`_ZN2ck4gemmEv` → `_ZN2ck`).
_C_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9]*_")
_CXX_NAMESPACE = re.compile(r"_ZN(\d+)([A-Za-z_][A-Za-z0-9_]*)")
#: A C name's suffix from its last underscore (`gemm_f32` → `_f32`).
_C_SUFFIX = re.compile(r"_[A-Za-z0-9]+\Z")
#: A word of a C name, between underscores, that may name what its functions do (`gemm` of
#: `fused_gemm_relu`): a letter first and three characters at least, as shorter ones (`v2`,
#: `x`) stand inside too many names.
_C_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{2,}")


@dataclass(frozen=True)
class Build:
    """A built tree of the engine, and how it was found (said to the user)."""

    path: Path
    found_as: str


def detect(directory: Path, *, nix_timeout_s: float = NIX_TIMEOUT_S) -> EngineKind:
    """What the project in `directory` builds; never raises for what it cannot learn."""
    builds, notes = find_builds(directory, nix_timeout_s)
    if builds:
        try:
            kind = from_builds(builds)
        except ImportError as exc:  # the core install lacks the readers (pyelftools, ...)
            notes.append(f"reading the build needs qualify[stages] ({exc.name} is missing)")
        except OSError as exc:  # a file of it this user may not read, or one gone meanwhile
            notes.append(f"{_listed(builds)} could not be read: {exc}")
        else:
            if kind is not None:
                return replace(kind, **build_tools(builds)).noting(notes)
            notes.append(f"{_listed(builds)} holds no ELF file or GPU code object")
        return replace(from_sources(directory), **build_tools(builds)).noting(notes)
    return from_sources(directory).noting(notes)


def build_tools(builds: Sequence[Build]) -> dict[str, Any]:
    """The programs the builds hold (files with an execute bit under bin/ and libexec/, by
    name) and whether one holds a ctest tree, as `EngineKind`'s fields."""
    tools: set[str] = set()
    ctest = False
    for build in builds:
        for folder in ("bin", "libexec"):
            root = build.path / folder
            if root.is_dir():
                tools.update(f.name for f in root.rglob("*") if f.is_file() and os.access(f, os.X_OK))
        ctest = ctest or (build.path / "share" / "tests" / "CTestTestfile.cmake").is_file()
    return {"tools": frozenset(tools), "ctest": ctest}


def find_builds(directory: Path, nix_timeout_s: float) -> tuple[list[Build], list[str]]:
    """The flake's default package if it is in the store, else the `result*` out-links; with
    notes saying why each place gave nothing."""
    notes: list[str] = []
    if (directory / "flake.nix").is_file():
        out, why = flake_out_path(directory, nix_timeout_s)
        if out is not None:
            return [Build(out, "the flake's default package")], notes
        notes.append(why)
    links = [
        Build(link, f"the out-link {link.name}")
        for link in sorted(directory.glob("result*"))
        if link.is_symlink() and link.exists()
    ]
    if not links:
        notes.append(f"no result* out-link in {directory}")
    return links, notes


def flake_out_path(directory: Path, timeout_s: float) -> tuple[Path | None, str]:
    """The out path of the flake's `.#default` when it is valid in the store, else None and why."""
    code, text = capture(
        [*_NIX, "eval", "--raw", *_NIX_QUIET, ".#default.outPath"], cwd=directory, timeout_s=timeout_s
    )
    if code == 127:
        return None, "nix is not installed: the flake's default package was not looked for"
    if code == 124:
        return None, f"nix took over {timeout_s:g} s to evaluate the flake's default package: left alone"
    if code != 0:
        lines = text.strip().splitlines()
        # nix's own words, not the advice it ends with ("use '--show-trace' ...").
        error = next((line for line in lines if line.startswith("error:")), lines[-1] if lines else "")
        return None, f"the flake's default package does not evaluate offline: {error.strip()[:300]}"
    out = text.strip()
    code, _ = capture([*_NIX, "path-info", "--offline", out], timeout_s=timeout_s)
    if code != 0 or not Path(out).exists():
        return None, f"the flake's default package {out} is not built (`nix build` makes it)"
    return Path(out), ""


def from_builds(builds: Sequence[Build]) -> EngineKind | None:
    """What the builds hold, by the check's own scanner; None when they hold no ELF or GPU code.
    Raises ImportError when the scanner's libraries are not installed."""
    from qualify.compile.scan import FAMILIES, scan

    counts: Counter[str] = Counter()
    binaries: list[Path] = []
    where: list[Build] = []
    for build in builds:
        found = scan(build.path, host_patterns=DEFAULT_PATTERNS)
        root = build.path.resolve()
        for family, n in found.counts().items():
            counts[family] += n
        binaries += [root / f["file"] if root.is_dir() else root for f in found.files]
        if found.files:
            where.append(build)
    if not where:
        return None
    shown = _listed(where)
    gpu = tuple(f for f in FAMILIES if f != "host" and counts[f])
    if gpu:
        what = " and ".join(f"{counts[f]} {family_words(f)} kernels" for f in gpu)
        return EngineKind(require=gpu, found=f"found {what} in {shown}")
    if counts["host"]:
        return EngineKind(
            host_patterns=DEFAULT_PATTERNS,
            patterns="ggml",
            found=f"found no GPU code in {shown}; {counts['host']} host functions match ggml's "
            "kernel names (host_patterns)",
        )
    names = sorted({name for path in binaries for name in exported_functions(path)})
    guessed = guess_patterns(names)
    if guessed:
        return EngineKind(
            host_patterns=guessed,
            patterns="guessed",
            found=f"found no GPU code in {shown}, and no function matching ggml's kernel names; "
            f"{sum(any(fnmatch.fnmatchcase(n, p) for p in guessed) for n in names)} of its "
            f"{len(names)} exported functions " + " or ".join(_pattern_words(p) for p in guessed),
        )
    return EngineKind(
        host_patterns=DEFAULT_PATTERNS,
        patterns="default",
        found=f"found no GPU code in {shown}, no function matching ggml's kernel names, and no "
        f"prefix, suffix or word shared by its {len(names)} exported functions",
    )


def exported_functions(path: Path) -> list[str]:
    """The defined functions an ELF executable or library exports (its dynamic symbols, else
    its global ones); [] for any other file, or one that does not read."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        with path.open("rb") as fh:
            if fh.read(4) != ELF_MAGIC:
                return []
            fh.seek(0)
            elf = ELFFile(fh)
            for section in (".dynsym", ".symtab"):
                table = elf.get_section_by_name(section)
                if not isinstance(table, SymbolTableSection):
                    continue
                names = [
                    sym.name
                    for sym in table.iter_symbols()
                    if sym["st_info"]["type"] == "STT_FUNC"
                    and sym["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
                    and sym["st_other"]["visibility"] in ("STV_DEFAULT", "STV_PROTECTED")
                    and sym["st_size"] > 0
                    and isinstance(sym["st_shndx"], int)  # defined here, not imported
                ]
                # An executable's .dynsym holds only what it imports: then its .symtab.
                if names:
                    return names
    except (OSError, ELFError):
        pass  # a file the scanner could read but this cannot: it only adds no names
    return []


def guess_patterns(names: Iterable[str], most: int = 3) -> tuple[str, ...]:
    """Globs for what most of `names` share: a prefix (`ck_*`), a suffix (`*_f32`) or a word
    (`*gemm*`), each naming at least 2 functions and a fifth of them; those naming the most
    functions first, a prefix before a suffix before a word where they name as many, and one
    naming no function the globs before it do not is left out (at most `most`)."""
    unique = set(names)
    counts: Counter[tuple[int, str]] = Counter()
    for name in unique:
        counts.update(_shared_parts(name))
    # The rule's counts rule out the rare parts first: only the few left are matched as globs.
    kept = [part for part, n in counts.items() if n >= 2 and n * 5 >= len(unique)]
    matched = {part: {n for n in unique if fnmatch.fnmatchcase(n, part[1])} for part in kept}
    chosen: list[str] = []
    covered: set[str] = set()
    for part in sorted(kept, key=lambda part: (-len(matched[part]), part)):
        if len(chosen) < most and not matched[part] <= covered:
            chosen.append(part[1])
            covered |= matched[part]
    return tuple(chosen)


#: The kinds of part `guess_patterns` looks for, in the order it prefers them.
_PREFIX, _SUFFIX, _WORD = range(3)


def _shared_parts(name: str) -> set[tuple[int, str]]:
    """The globs `name` suggests, each with its kind: its prefix, its suffix, its words."""
    parts: set[tuple[int, str]] = set()
    prefix = _prefix(name)
    if prefix:
        parts.add((_PREFIX, f"{prefix}*"))
    if name.startswith("_"):  # mangled C++ (its words are lengths and types) or the runtime's own
        return parts
    suffix = _C_SUFFIX.search(name)
    if suffix and suffix.start() > 0:
        parts.add((_SUFFIX, f"*{suffix.group()}"))
    parts.update((_WORD, f"*{word}*") for word in name.split("_") if _C_WORD.fullmatch(word))
    return parts


def _pattern_words(pattern: str) -> str:
    """What functions a guessed glob names, in words: "start with ck_", "end with _f32",
    "contain gemm"."""
    if pattern.startswith("*") and pattern.endswith("*"):
        return f"contain {pattern.strip('*')}"
    if pattern.startswith("*"):
        return f"end with {pattern[1:]}"
    return f"start with {pattern.rstrip('*')}"


def _prefix(name: str) -> str | None:
    if name.startswith("_ZN"):
        m = _CXX_NAMESPACE.match(name)
        if m and len(m.group(2)) >= int(m.group(1)):
            return f"_ZN{m.group(1)}{m.group(2)[: int(m.group(1))]}"
        return None
    if name.startswith("_"):  # the C runtime's and the compiler's own (_init, __do_global_...)
        return None
    m = _C_PREFIX.match(name)
    return m.group() if m and len(m.group()) < len(name) else None


def _listed(builds: Sequence[Build]) -> str:
    return "; ".join(f"{b.path.resolve()} ({b.found_as})" for b in builds)
