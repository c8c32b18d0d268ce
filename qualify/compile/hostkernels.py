"""Host kernels of CPU inference engines: named functions, their code size and stack frame.

A "host kernel" is a function in an arm's ELF binaries whose name matches a glob pattern
(for llama.cpp's ggml: the vector dot products, the per-op forward passes, the quantizers).
Code size comes from the ELF symbol table; stack frame size from the ``.su`` files that
gcc and clang write with ``-fstack-usage``.

Formats of ``.su`` lines, as written by the compilers this was checked against::

    gcc-12,  C:    path:line:col:name<TAB>bytes<TAB>qualifiers
    gcc-12,  C++:  path:line:col:static int ns::K::f(int, float*)<TAB>...   (demangled signature)
    clang-19, C:   path:line:name<TAB>...                                  (no column)
    clang-19, C++: path:line:_ZN2ns1K1fEiPf<TAB>...                        (mangled)

gcc names clones without their number (``helper.constprop``); qualifiers are
``static``, ``dynamic`` or ``dynamic,bounded``.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from qualify.compile.params import DEFAULT_PATTERNS

# Clone suffixes gcc and clang append to specialised copies of one function. The number is
# optional because gcc's .su files name clones without it ("helper.constprop").
_CLONE_SUFFIX = re.compile(r"(?:\.(?:constprop|isra|part|lto_priv|llvm|cold)(?:\.\d+)?)+$")
# Location prefix of a .su line: gcc writes "path:line:col:", clang "path:line:".
_SU_LOCATION = re.compile(r"^(?P<path>.*?):\d+:(?:\d+:)?(?P<name>.+)$")
_TRAILING_IDENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)$")
_ELF_MAGIC = b"\x7fELF"


class HostKernelError(ValueError):
    """A binary could not be read as ELF; the message names the path."""


@dataclass(frozen=True)
class HostKernel:
    """One function (all its compiler clones) in one binary.

    ``code_size`` is the sum of ``st_size`` over ``symbols``; ``stack_bytes`` and
    ``stack_qualifiers`` are None when no ``.su`` line names the function.
    """

    name: str
    symbols: tuple[str, ...]
    code_size: int
    binary: str
    stack_bytes: int | None = None
    stack_qualifiers: str | None = None


def fold_name(symbol: str) -> str:
    """Strip clone suffixes (``.constprop.N``, ``.isra.N``, ``.part.N``, ``.cold``,
    ``.lto_priv.N``, ``.llvm.N`` and chains of them) so clones group with their origin.

    C++ names stay mangled: the mangled form is stable across compilers and demangling
    would need a dependency (or c++filt) for no gain in grouping.
    """
    return _CLONE_SUFFIX.sub("", symbol)


def identifier(name: str) -> str:
    """The bare function identifier of a C name, an Itanium-mangled name or a gcc
    demangled signature; a C name (or anything unrecognised) is returned unchanged."""
    name = fold_name(name)
    if name.startswith("_Z"):
        return _mangled_identifier(name) or name
    if "(" not in name:
        return name
    return _signature_identifier(name) or name


def _mangled_identifier(name: str) -> str | None:
    """Last source name of a plain or nested Itanium name (``_Z3foo…``, ``_ZN2ns3fooE…``,
    ``_ZL3foo…``); substitutions and operators are not decoded (None)."""
    i = 2
    if name[i : i + 1] == "L":  # internal linkage (static)
        i += 1
    if name[i : i + 1] == "N":
        i += 1
        while name[i : i + 1] in ("r", "V", "K"):  # cv-qualifiers of member functions
            i += 1
    last: str | None = None
    while i < len(name) and name[i].isdigit():
        m = re.match(r"\d+", name[i:])
        assert m is not None
        length = int(m.group())
        i += len(m.group())
        last = name[i : i + length]
        i += length
    return last


def _signature_identifier(signature: str) -> str | None:
    """Identifier of a gcc signature such as ``static int ns::K::f(int) const [with T = int]``:
    the name before the last top-level parameter list, so a lambda inside ``f(...)`` is
    keyed by its own name (``_FUN``/``operator``), not by ``f``."""
    signature = signature.split(" [with ", 1)[0]
    close = signature.rfind(")")
    depth = 0
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(signature[i], 0)
        if depth == 0:
            prefix = signature[:i].rstrip()
            break
    else:
        return None
    # Template arguments of a specialisation: "f<float>(...)".
    while prefix.endswith(">"):
        depth = 0
        for j in range(len(prefix) - 1, -1, -1):
            depth += {">": 1, "<": -1}.get(prefix[j], 0)
            if depth == 0:
                prefix = prefix[:j]
                break
        else:
            return None
    m = _TRAILING_IDENT.search(prefix)
    return m.group(1) if m else None


def read_symbols(path: Path, patterns: Iterable[str] = DEFAULT_PATTERNS) -> list[HostKernel]:
    """Host kernels of one ELF file, sorted by name, without stack usage.

    Reads ``.symtab``, or ``.dynsym`` when the file is stripped; keeps defined STT_FUNC
    symbols with a size. A pattern matches the folded name or, for C++, its identifier.
    Raises HostKernelError when the file is not readable ELF.
    """
    pats = tuple(patterns)
    groups: dict[str, dict[tuple[str, int], int]] = {}
    try:
        with path.open("rb") as fh:
            elf = ELFFile(fh)
            table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
            if not isinstance(table, SymbolTableSection):
                return []
            for sym in table.iter_symbols():
                if sym["st_info"]["type"] != "STT_FUNC" or sym["st_size"] <= 0:
                    continue
                # Special indices (SHN_UNDEF, SHN_ABS, ...) come back as strings.
                if not isinstance(sym["st_shndx"], int):
                    continue
                folded = fold_name(sym.name)
                ident = identifier(folded)
                if not any(fnmatch.fnmatchcase(n, p) for p in pats for n in {folded, ident}):
                    continue
                # Keyed by (name, address): a symbol listed twice is one piece of code, while
                # same-named static functions of different units are different code.
                groups.setdefault(folded, {})[(sym.name, sym["st_value"])] = sym["st_size"]
    except (OSError, ELFError) as exc:
        raise HostKernelError(f"{path}: not a readable ELF file: {exc}") from exc
    return [
        HostKernel(
            name=name,
            symbols=tuple(sorted({raw for raw, _ in syms})),
            code_size=sum(syms.values()),
            binary=str(path),
        )
        for name, syms in sorted(groups.items())
    ]


def read_stack_usage(paths: Iterable[Path]) -> dict[str, tuple[int, str]]:
    """Map function identifier → (bytes, qualifiers) from ``.su`` files (gcc or clang).

    Lines that do not parse are skipped: a ``.su`` file is advisory, not a contract.
    """
    usage: dict[str, tuple[int, str]] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.rsplit("\t", 2)
            if len(parts) != 3 or not parts[1].isdigit():
                continue
            m = _SU_LOCATION.match(parts[0])
            if m is None:
                continue
            key = identifier(m.group("name"))
            size = int(parts[1])
            # A name can appear more than once: static functions of the same name in different
            # translation units, template instances, overloads. Keep the largest frame, the
            # conservative figure for a stack budget.
            if key not in usage or size > usage[key][0]:
                usage[key] = (size, parts[2].strip())
    return usage


def _elf_files(root: Path) -> list[Path]:
    """Regular ELF executables and shared libraries under root (resolved, deduplicated);
    symlinks leading outside root are skipped so a tree is judged by its own files."""
    found: dict[Path, None] = {}
    for dirpath, _dirs, files in os.walk(root):
        for fname in sorted(files):
            path = Path(dirpath) / fname
            real = path.resolve()
            if not real.is_relative_to(root) or not real.is_file():
                continue
            try:
                with real.open("rb") as fh:
                    head = fh.read(18)
            except OSError:
                continue
            if len(head) < 18 or head[:4] != _ELF_MAGIC:
                continue
            # e_type 2 = ET_EXEC, 3 = ET_DYN; relocatable objects are not what the arm ships.
            e_type = int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")
            if e_type in (2, 3):
                found[real] = None
    return sorted(found)


def host_kernels(
    root: Path, patterns: Iterable[str] = DEFAULT_PATTERNS, su_root: Path | None = None
) -> list[HostKernel]:
    """Host kernels of every ELF executable/shared library under root, sorted by name then
    binary, with stack usage from ``.su`` files under su_root (default
    ``root/share/stack-usage``) attached by function identifier. Returns an empty list when
    nothing matches; never invents kernels. HostKernelError propagates from corrupt ELF."""
    root = root.resolve()
    pats = tuple(patterns)
    su_dir = su_root if su_root is not None else root / "share" / "stack-usage"
    stack = read_stack_usage(sorted(su_dir.rglob("*.su"))) if su_dir.is_dir() else {}
    kernels: list[HostKernel] = []
    for path in _elf_files(root):
        for k in read_symbols(path, pats):
            su = stack.get(identifier(k.name))
            kernels.append(
                HostKernel(
                    name=k.name,
                    symbols=k.symbols,
                    code_size=k.code_size,
                    binary=k.binary,
                    stack_bytes=su[0] if su else None,
                    stack_qualifiers=su[1] if su else None,
                )
            )
    return sorted(kernels, key=lambda k: (k.name, k.binary))
