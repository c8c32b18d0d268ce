"""What a run's compile check failed on, by source file: the kernels a remedy must bring back.

The check is read from the run's folder as qualify saved and sealed it: its plan entry
(result.json), both roles' kernel tables and the candidate's source files
(`source_file`, `qualify.compile.scan`). A run whose seal does not hold is refused, as is a
check whose kernels are not tied to their source files (a run made before they were read, or a
stripped library): a remedy compiles source files, and guessing them from kernel names could
rebuild the wrong ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from qualify.compile.diff import KernelDiff, Limits, diff
from qualify.compile.params import CompileParams
from qualify.compile.scan import load_tables
from qualify.core.errors import QualifyError, UsageError
from qualify.core.tomlfile import suggest
from qualify.records import seal
from qualify.records.result import CheckResult
from qualify.remedy.families import AMDGPU, Family, scanned_family

KIND = "kernel-resources"


@dataclass(frozen=True)
class CompileCheck:
    """A run's compile check, read back: its folder, its limits, both roles' tables, the family
    of kernels it holds, whether it read spill bytes from ptxas reports and how it named the
    family's disassembler (its parameter's value: a template, "auto" or "")."""

    run: Path
    folder: Path
    name: str
    limits: Limits
    pinned: dict[str, pd.DataFrame]
    candidate: dict[str, pd.DataFrame]
    family: Family = AMDGPU
    spills_from_logs: bool = False
    disassembler: str = "auto"

    @property
    def label(self) -> str:
        return f"{self.folder.parent.name}/{self.folder.name}"


def compile_check(run: Path, name: str | None) -> CompileCheck:
    """The run's `kernel-resources` check named `name` (None: its only one), refused unless
    both roles were scanned and its seal holds."""
    found = sorted(p.parent for p in run.glob("*/*/result.json") if _kind(p) == KIND)
    if name is not None:
        chosen = [f for f in found if name in (f.name, f"{f.parent.name}/{f.name}")]
        if not chosen:
            names = [f"{f.parent.name}/{f.name}" for f in found]
            raise UsageError(
                f"{run}: no {KIND} check named {name!r}{suggest(name, names)}",
                "checks of that kind here: " + (", ".join(names) or "none"),
            )
        found = chosen
    if len(found) != 1:
        raise UsageError(
            f"{run}: {len(found)} {KIND} checks, not one",
            "name the check: --check STAGE/CHECK"
            if found
            else "qualify remedy needs a run whose compile stage ran",
        )
    folder = found[0]
    # Every family's table is written by every scan: the AMDGPU one stands for "scanned".
    tables = {role: folder / role / "amdgpu.parquet" for role in ("pinned", "candidate")}
    missing = [role for role, path in tables.items() if not path.is_file()]
    if missing:
        raise UsageError(
            f"{folder}: the {' and '.join(missing)} role was not scanned",
            "run the compile stage again: qualify run --run RUN --only compile",
        )
    problem, _ = seal.stage_problem(folder.parent, [folder / "result.json", *tables.values()], run)
    problem = problem or seal.run_problem(run)[0]
    if problem is not None:
        raise UsageError(f"{run}: {problem}", "a remedy compares with what the run measured: run it again")
    saved = CheckResult.load(folder / "result.json")
    spec = saved.measured_spec()
    params = CompileParams.of(spec, folder / "result.json")
    candidate = load_tables(folder / "candidate")
    family = scanned_family(folder, candidate)
    return CompileCheck(
        run=run,
        folder=folder,
        name=folder.name,
        limits=Limits.from_plan(spec.limits, params.cuda_block_size),
        pinned=load_tables(folder / "pinned"),
        candidate=candidate,
        family=family,
        spills_from_logs=bool(params.ptxas_logs),
        disassembler=str(spec.params.get(family.disassembler.param, "auto")),
    )


def _kind(result: Path) -> str | None:
    try:
        return CheckResult.load(result).kind
    except QualifyError:  # another check's unreadable record is not this one's problem
        return None


@dataclass(frozen=True)
class FailingSource:
    """One source file of the candidate and its kernels' outcome against pinned."""

    source_file: str
    kernels: int
    failing: tuple[str, ...]  # the keys of its kernels that FAIL


def failing_sources(check: CompileCheck) -> tuple[list[KernelDiff], list[FailingSource]]:
    """The check's comparison and each source file holding a failing kernel, most failures first."""
    family = check.family
    table = check.candidate[family.name]
    if table.empty or table["source_file"].isna().all():
        raise UsageError(
            f"{check.folder}: the candidate's kernels are not tied to their source files",
            "the library was stripped, or the run was made before qualify read source files: run "
            "the compile stage again (qualify run --run RUN --only compile)",
        )
    results = diff(check.pinned, check.candidate, check.limits)
    failing = {r.key for r in results if r.family == family.name and r.severity == "FAIL"}
    real = {r.key for r in results if r.family == family.name and r.severity != "stub"}
    by_source: dict[str, set[str]] = {}
    # Keys as the comparison matched them (a CUDA name with its translation-unit hash folded).
    for source, (_, key) in zip(table["source_file"], family.kernels(table), strict=True):
        if isinstance(source, str) and key in real:
            by_source.setdefault(source, set()).add(key)
    found = [
        FailingSource(source, len(keys), tuple(sorted(keys & failing)))
        for source, keys in by_source.items()
        if keys & failing
    ]
    found.sort(key=lambda f: (-len(f.failing), f.source_file))
    return results, found
