"""A variant's units through nix: which source files it can compile, each built from the run's
locked source revision, and its code objects scanned as the compile stage scans an arm.

The variant's installable is an attribute set of derivations, one per source file, each naming
its file in a `source_file` attribute (`nix eval --apply`, which Nix 2.8, current CppNix and Lix
all have). A unit is built with `nix build --json` like an arm (`qualify.build.nix`), and read
with the candidate's own disassembler, as the compile check read the candidate. A CUDA unit
also holds its `ptxas -v` report (`share/*.log`), where the check read spill bytes from the
build's: a cubin does not record them, and a unit read without them could not spill.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualify.build import nix
from qualify.compile.disassembly import DisassemblyError, Tool, probe
from qualify.compile.mixreading import MixReading
from qualify.compile.mixsetup import on_path
from qualify.compile.ptxaslog import PtxasLogError
from qualify.compile.scan import load_tables, save_tables, scan
from qualify.core.errors import QualifyError
from qualify.remedy.families import Family

#: What `nix eval --apply` gives for each attribute: its source file and derivation, or nulls.
_SOURCES = (
    "v: builtins.mapAttrs (n: d: { source = d.source_file or null; "
    "drv = if d ? source_file then d.drvPath or null else null; }) v"
)


class RemedyError(QualifyError):
    """A variant's units could not be listed, built or read."""


def variant_ref(locked_url: str | None, installable: str) -> str:
    """The installable as built from the run's locked flake (`.#x` and `#x` are the project's):
    the units compile the revision the arms were built from, never the working tree's."""
    if not installable.startswith((".#", "#")):
        return installable
    if locked_url is None:
        raise RemedyError(
            f"{installable} is of the project's flake, and the run recorded no revision it built",
            "remedy a run whose build stage ran, or name the flake in the installable",
        )
    return f"{locked_url}#{installable.split('#', 1)[1]}"


@dataclass(frozen=True)
class ListedUnit:
    """A variant's attribute for one source file, and the derivation it evaluates to now."""

    attr: str
    drv: str | None


def list_units(ref: str, env: Mapping[str, str]) -> dict[str, ListedUnit]:
    """Source file → its unit, for every attribute that names its source file."""
    try:
        found = nix.eval_json(ref, env, apply=_SOURCES)
    except nix.NixError as exc:
        raise RemedyError(
            f"{ref}: its units could not be listed: {exc.message}",
            "a remedy variant's installable is an attribute set of derivations, one per source file, "
            "each with a `source_file` attribute (docs/remedy.md)",
        ) from None
    if not isinstance(found, dict):
        raise RemedyError(f"{ref}: not an attribute set of derivations", "see docs/remedy.md")
    units: dict[str, ListedUnit] = {}
    for attr, listed in sorted(found.items()):
        source = listed.get("source") if isinstance(listed, dict) else None
        if isinstance(source, str) and source:
            if source in units:
                raise RemedyError(
                    f"{ref}: {units[source].attr!r} and {attr!r} both compile {source}",
                    "give each source file one attribute",
                )
            drv = listed.get("drv")
            units[source] = ListedUnit(attr, drv if isinstance(drv, str) else None)
    return units


@dataclass(frozen=True)
class BuiltUnit:
    ok: bool
    drv: str | None
    out: str | None
    seconds: float
    error: str | None


def build_unit(ref: str, attr: str, folder: Path, env: Mapping[str, str]) -> BuiltUnit:
    """`nix build` of one unit; its output is kept alive by a link in `folder`."""
    built = nix.build(f"{ref}.{attr}", folder / "result", [], env, folder / "build.log")
    out = next(iter(built.outputs.values()), None)
    error = None if built.ok else f"nix build exited {built.returncode}: see {folder / 'build.log'}"
    return BuiltUnit(built.ok, built.drv, out, round(built.seconds, 3), error)


def disassembler(
    family: Family, argv: list[str] | None, named: str, env: Mapping[str, str]
) -> tuple[Tool | None, str | None]:
    """The candidate's disassembler as the compile check ran it (`argv`), or None where it read
    no mix; and a note when another is used. A check that found its tool on PATH (`named` is
    "auto") is read here by the one on this PATH where its own is not on this host: the run may
    have been measured on another machine. A tool the check named must run as it is."""
    if not argv:
        return None, None
    try:
        return probe(argv, family.disassembler.options, env), None
    except DisassemblyError as exc:
        if named != "auto":
            raise RemedyError(f"the candidate's disassembler: {exc.message}", exc.hint) from None
        found, why = on_path(family.disassembler)
        if found is None:
            raise RemedyError(
                f"the candidate's disassembler: {exc.message}; and on this PATH: {why}",
                f"put the {family.label} disassembler on PATH, or judge the saved units (--no-build)",
            ) from None
    try:
        tool = probe(found, family.disassembler.options, env)
    except DisassemblyError as exc:
        raise RemedyError(f"{' '.join(found)}: {exc.message}", exc.hint) from None
    said = f"the check's {' '.join(argv)} is not here: reading the units with {' '.join(found)}"
    return tool, f"{said} ({tool.version})"


def read_unit(
    out: Path, source_file: str, folder: Path, tool: Tool | None, family: Family, spills_from_logs: bool
) -> pd.DataFrame:
    """The unit's kernels of `family`, saved in `folder`; each tied to `source_file` where its
    code object does not say (a device-only code object or a cubin has no host symbol table).
    With `spills_from_logs`, its ptxas reports give the spill bytes, as the build's did."""
    reading = None
    if tool is not None:
        reading = MixReading(
            amdgpu=tool if family.name == "amdgpu" else None,
            cuda=tool if family.name == "cuda" else None,
            folder=folder,
        )
    logs = sorted((out / "share").glob("*.log")) if spills_from_logs else []
    if spills_from_logs and not logs:
        raise RemedyError(
            f"{out}: the unit of {source_file} holds no ptxas report (share/*.log), and the check "
            "read spill bytes from the build's",
            "compile the unit with -Xptxas -v and keep its output as share/<stem>.log",
        )
    try:
        found = scan(out, host_patterns=(), ptxas_logs=logs, mix=reading)
    except PtxasLogError as exc:
        raise RemedyError(f"{out}: {exc}") from None
    finally:
        if reading is not None:
            reading.close()
    if found.unreadable:
        first = found.unreadable[0]
        raise RemedyError(f"{out}: {first['file']}: {first['message']}")
    table = found.tables[family.name]
    if table.empty:
        raise RemedyError(f"{out}: no {family.label} kernels in the unit of {source_file}")
    table["source_file"] = table["source_file"].fillna(source_file) if "source_file" in table else source_file
    save_tables(found, folder)
    return load_tables(folder)[family.name]
