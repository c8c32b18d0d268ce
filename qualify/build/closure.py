"""Name and version parsing for Nix store paths, and an nvd-style diff of two closures."""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    import pandas as pd

# Store paths are /nix/store/<32-char hash>-<name>; the hash alphabet is a subset of [0-9a-z].
_HASH_PREFIX = re.compile(r"^[0-9a-z]{32}-")

# `nix store diff-closures` strips an output suffix with this regex (src/nix/diff-closures.cc).
_OUTPUT_SUFFIX = re.compile(r"^(.*)-([a-z]+|lib32|lib64)$")

# Unlike diff-closures we only accept suffixes that really are output names: its bare regex
# turns "clang-20.0.0-rocm" into clang 20.0.0 with output "rocm", hiding the ROCm LLVM
# behind the plain-nixpkgs one. A false "out" is the safer mistake when no deriver is known.
KNOWN_OUTPUTS = frozenset(
    {
        "out",
        "bin",
        "lib",
        "dev",
        "doc",
        "man",
        "info",
        "static",
        "icd",
        "debug",
        "lib32",
        "lib64",
        "python",
        "headers",
    }
)

# `nix-store --query --deriver` prints this for paths whose deriver is not recorded.
_UNKNOWN_DERIVER = "unknown-deriver"

# Nix's string2Int<int> rejects values that overflow a C int, so such digit runs compare as strings.
_INT_MAX = 2**31 - 1

CHANGE_ORDER = ("added", "removed", "upgraded", "downgraded", "changed", "rebuilt", "identical")

COLUMNS = (
    "pname",
    "output",
    "change",
    "left_versions",
    "right_versions",
    "left_size",
    "right_size",
    "size_delta",
    "pep440_disagrees",
)

_SIZE_COLUMNS = ("left_size", "right_size", "size_delta")


def store_name(path: str) -> str:
    """Return the basename of a store path without its hash ("<hash>-clang-20.0.0" -> "clang-20.0.0")."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    if not _HASH_PREFIX.match(base):
        raise ValueError(f"not a Nix store path: {path!r}")
    return base[33:]


def parse_drv_name(name: str) -> tuple[str, str]:
    """Split a derivation name into (name, version) like Nix's DrvName / builtins.parseDrvName."""
    for i in range(len(name) - 1):
        # names.cc uses isalpha() in the C locale, i.e. ASCII letters only.
        if name[i] == "-" and name[i + 1] not in string.ascii_letters:
            return name[:i], name[i + 1 :]
    return name, ""


def split_output(out_name: str, drv_name: str | None) -> tuple[str, str]:
    """Split an output path's name into (derivation name, output name)."""
    if drv_name is not None:
        if out_name == drv_name:
            return drv_name, "out"
        if out_name.startswith(drv_name + "-"):
            return drv_name, out_name[len(drv_name) + 1 :]
    match = _OUTPUT_SUFFIX.match(out_name)
    if match and match.group(2) in KNOWN_OUTPUTS:
        return match.group(1), match.group(2)
    return out_name, "out"


@dataclass(frozen=True)
class Package:
    """One store path with its parsed name, version and output."""

    path: str
    pname: str
    version: str
    output: str
    size: int | None = None


def package_of(path: str, deriver: str | None = None, size: int | None = None) -> Package:
    """Parse a store path (output or .drv); `deriver` is the output's .drv store path if known."""
    name = store_name(path)
    if name.endswith(".drv"):
        # A .drv has no output suffix; its name is already the derivation name.
        pname, version = parse_drv_name(name.removesuffix(".drv"))
        return Package(path, pname, version, "drv", size)
    drv_name = None
    if deriver and deriver != _UNKNOWN_DERIVER:
        drv_name = store_name(deriver).removesuffix(".drv")
    # The output suffix must go before parseDrvName, which would otherwise keep it in the version.
    base, output = split_output(name, drv_name)
    pname, version = parse_drv_name(base)
    return Package(path, pname, version, output, size)


def _next_component(s: str, pos: int) -> tuple[str, int]:
    """Mirror names.cc nextComponent: skip separators, then take a digit run or a non-digit run."""
    end = len(s)
    while pos < end and s[pos] in ".-":
        pos += 1
    start = pos
    if pos < end and s[pos] in string.digits:
        while pos < end and s[pos] in string.digits:
            pos += 1
    else:
        while pos < end and s[pos] not in string.digits and s[pos] not in ".-":
            pos += 1
    return s[start:pos], pos


def _as_int(c: str) -> int | None:
    # Components are either all ASCII digits or contain none, so only the overflow check matters.
    if c and c[0] in string.digits:
        n = int(c)
        return n if n <= _INT_MAX else None
    return None


def _components_lt(c1: str, c2: str) -> bool:
    n1, n2 = _as_int(c1), _as_int(c2)
    if n1 is not None and n2 is not None:
        return n1 < n2
    # Same rule order as names.cc; the order matters: "pre" < "" but "" < a number.
    if (c1 == "" and n2 is not None) or (c1 == "pre" and c2 != "pre"):
        return True
    if c2 == "pre":
        return False
    # Exactly one side is a number here; names.cc: "Assume that `2.3a' < `2.3.1'."
    if n1 is not None or n2 is not None:
        return n2 is not None
    return c1 < c2


def compare_versions(a: str, b: str) -> int:
    """Compare two versions like Nix's compareVersions: -1, 0 or 1."""
    p1 = p2 = 0
    while p1 < len(a) or p2 < len(b):
        c1, p1 = _next_component(a, p1)
        c2, p2 = _next_component(b, p2)
        if _components_lt(c1, c2):
            return -1
        if _components_lt(c2, c1):
            return 1
    return 0


def pep440_order(a: str, b: str) -> int | None:
    """Compare two versions by PEP 440: -1, 0 or 1, or None if either is not a PEP 440 version."""
    try:
        va, vb = Version(a), Version(b)
    except InvalidVersion:
        return None
    return (va > vb) - (va < vb)


def _version_order(a: str, b: str) -> int:
    # Versions Nix considers equal ("1.0" vs "1-0") still get a stable order by their text.
    return compare_versions(a, b) or (a > b) - (a < b)


_VERSION_KEY = functools.cmp_to_key(_version_order)


def _total_size(pkgs: list[Package]) -> int | None:
    # One unknown size makes the sum unknown: a partial total would understate the delta.
    if any(p.size is None for p in pkgs):
        return None
    return sum(p.size or 0 for p in pkgs)


def _classify(left: list[Package], right: list[Package]) -> tuple[str, bool]:
    """Return (change kind, PEP 440 disagrees) for one (pname, output) group."""
    if not left:
        return "added", False
    if not right:
        return "removed", False
    lv = sorted((p.version for p in left), key=_VERSION_KEY)
    rv = sorted((p.version for p in right), key=_VERSION_KEY)
    if set(lv) == set(rv):
        same_paths = {p.path for p in left} == {p.path for p in right}
        return ("identical" if same_paths else "rebuilt"), False
    if compare_versions(lv[-1], rv[0]) < 0:
        pep = pep440_order(lv[-1], rv[0])
        return "upgraded", pep is not None and pep != -1
    if compare_versions(lv[0], rv[-1]) > 0:
        pep = pep440_order(lv[0], rv[-1])
        return "downgraded", pep is not None and pep != 1
    return "changed", False


def _group(pkgs: Iterable[Package]) -> tuple[dict[tuple[str, str], list[Package]], int]:
    groups: dict[tuple[str, str], list[Package]] = {}
    seen: set[str] = set()
    for p in pkgs:
        # Callers may concatenate overlapping closures; count each store path once.
        if p.path in seen:
            continue
        seen.add(p.path)
        groups.setdefault((p.pname, p.output), []).append(p)
    return groups, len(seen)


def diff_closures(left: Iterable[Package], right: Iterable[Package]) -> pd.DataFrame:
    """Diff two closures per (pname, output); path counts go to `attrs` for diff_summary."""
    # pandas is imported here so the name parsers stay cheap to import.
    import pandas as pd

    lgroups, lcount = _group(left)
    rgroups, rcount = _group(right)
    rows: list[dict[str, object]] = []
    for key in lgroups.keys() | rgroups.keys():
        lp, rp = lgroups.get(key, []), rgroups.get(key, [])
        change, disagrees = _classify(lp, rp)
        lsize, rsize = _total_size(lp), _total_size(rp)
        rows.append(
            {
                "pname": key[0],
                "output": key[1],
                "change": change,
                "left_versions": ", ".join(sorted((p.version for p in lp), key=_VERSION_KEY)),
                "right_versions": ", ".join(sorted((p.version for p in rp), key=_VERSION_KEY)),
                "left_size": lsize,
                "right_size": rsize,
                "size_delta": None if lsize is None or rsize is None else rsize - lsize,
                "pep440_disagrees": disagrees,
            }
        )
    rank = {c: i for i, c in enumerate(CHANGE_ORDER)}
    rows.sort(key=lambda r: (rank[str(r["change"])], str(r["pname"]), str(r["output"])))
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    # Nullable Int64 keeps sizes integral while an unknown size shows as pd.NA.
    df = df.astype({c: "Int64" for c in _SIZE_COLUMNS} | {"pep440_disagrees": bool})
    df.attrs["left_paths"] = lcount
    df.attrs["right_paths"] = rcount
    return df


def diff_summary(df: pd.DataFrame) -> dict[str, int]:
    """Count rows per change kind (all kinds present) plus the path counts of both closures."""
    counts = df["change"].value_counts()
    summary = {kind: int(counts.get(kind, 0)) for kind in CHANGE_ORDER}
    summary["left_paths"] = int(df.attrs["left_paths"])
    summary["right_paths"] = int(df.attrs["right_paths"])
    return summary
