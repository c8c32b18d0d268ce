"""A variant judged: the candidate with some source files rebuilt by it, compared kernel by
kernel with pinned by the compile check's own rules and limits, beside the candidate as built.

For each source file the variant compiled, a kernel of that file is

- *recovered* when it FAILs in the candidate and not with the variant,
- *still failing* when it FAILs in both,
- *newly broken* when it FAILs with the variant only,

counted over the kernels that are not stubs. Its cost is the code the file's kernels take
(their instruction bytes, summed) with the variant against the candidate. A kernel of the file
the variant's build lacks, or one it has and the candidate's file has not, is counted apart:
the unit did not reproduce the file, and its figures are not the library's.

Nothing ran on a GPU: recovered resources are static evidence read from code objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from qualify.compile.diff import KernelDiff, diff
from qualify.remedy.failing import CompileCheck
from qualify.remedy.families import Family


@dataclass(frozen=True)
class SourceOutcome:
    """One source file rebuilt by one variant."""

    source_file: str
    kernels: int
    failing_before: int
    recovered: int
    still_failing: int
    newly_broken: int
    warn_before: int
    warn_after: int
    code_bytes_before: int | None
    code_bytes_after: int | None
    #: Kernels of the file the unit lacks, and kernels it has that the file has not.
    missing: int
    extra: int
    #: The kernels it brought back and those it broke, by key.
    recovered_keys: tuple[str, ...] = ()
    newly_broken_keys: tuple[str, ...] = ()

    @property
    def code_change_pct(self) -> float | None:
        before, after = self.code_bytes_before, self.code_bytes_after
        if not before or after is None:
            return None
        return 100.0 * (after - before) / before

    def as_json(self) -> dict[str, object]:
        return {
            "source_file": self.source_file,
            "kernels": self.kernels,
            "failing_before": self.failing_before,
            "recovered": self.recovered,
            "still_failing": self.still_failing,
            "newly_broken": self.newly_broken,
            "warn_before": self.warn_before,
            "warn_after": self.warn_after,
            "code_bytes_before": self.code_bytes_before,
            "code_bytes_after": self.code_bytes_after,
            "code_change_pct": None if self.code_change_pct is None else round(self.code_change_pct, 2),
            "missing": self.missing,
            "extra": self.extra,
            "recovered_kernels": list(self.recovered_keys),
            "newly_broken_kernels": list(self.newly_broken_keys),
        }


def judge_variant(check: CompileCheck, units: Mapping[str, pd.DataFrame]) -> list[SourceOutcome]:
    """Each source file of `units` (its scanned table of the check's family, `source_file` set)
    judged.

    A kernel is one per chip (AMDGPU `processor`, CUDA `target`) as the comparison matches them:
    a source built for several chips and rebuilt for one has its other chips' kernels left as
    the candidate built them."""
    if not units:
        return []
    family = check.family
    candidate = check.candidate[family.name]
    replaced = _in(family, candidate, units)
    rebuilt = {k for t in units.values() for k in family.kernels(t)}
    kernels = set(family.kernels(candidate[replaced])) | rebuilt
    pinned = _only(family, check.pinned, kernels)
    before = _only(family, check.candidate, kernels)
    kept = before[family.name][~_in(family, before[family.name], units)]
    after = {**before, family.name: pd.concat([kept, *units.values()]).reset_index(drop=True)}
    was = _by_kernel(family, diff(pinned, before, check.limits))
    now = _by_kernel(family, diff(pinned, after, check.limits))
    outcomes = []
    for source, unit in units.items():
        mine = candidate[replaced & (candidate["source_file"] == source)]
        own, built = set(family.kernels(mine)), set(family.kernels(unit))
        judged = sorted(k for k in own & built if was[k].severity != "stub")
        failed_before = {k for k in judged if was[k].severity == "FAIL"}
        failed_after = {k for k in judged if now[k].severity == "FAIL"}
        outcomes.append(
            SourceOutcome(
                source_file=source,
                kernels=len(judged),
                failing_before=len(failed_before),
                recovered=len(failed_before - failed_after),
                still_failing=len(failed_before & failed_after),
                newly_broken=len(failed_after - failed_before),
                warn_before=sum(was[k].severity == "WARN" for k in judged),
                warn_after=sum(now[k].severity == "WARN" for k in judged),
                code_bytes_before=_code(mine),
                code_bytes_after=_code(unit),
                missing=len(own - built),
                extra=len(built - own),
                recovered_keys=tuple(k for _, k in sorted(failed_before - failed_after)),
                newly_broken_keys=tuple(k for _, k in sorted(failed_after - failed_before)),
            )
        )
    outcomes.sort(key=lambda o: (-o.failing_before, o.source_file))
    return outcomes


Kernel = tuple[str, str]  # (chip, key), as the comparison matches a family's kernels


def _in(family: Family, table: pd.DataFrame, units: Mapping[str, pd.DataFrame]) -> pd.Series:
    """The rows of `table` a unit replaces: its source's, on the chips the unit was built for."""
    rows = pd.Series(False, index=table.index)
    for source, unit in units.items():
        rows |= (table["source_file"] == source) & table[family.chip].isin(set(unit[family.chip]))
    return rows


def _only(
    family: Family, tables: Mapping[str, pd.DataFrame], kernels: set[Kernel]
) -> dict[str, pd.DataFrame]:
    """The tables cut to `kernels`: the other families left empty, since a unit holds one
    family's code and the comparison is of the rebuilt kernels alone."""
    cut = {}
    for name, table in tables.items():
        if name == family.name:
            cut[name] = table[[k in kernels for k in family.kernels(table)]].reset_index(drop=True)
        else:
            cut[name] = table.iloc[0:0]
    return cut


def _by_kernel(family: Family, results: list[KernelDiff]) -> dict[Kernel, KernelDiff]:
    return {(r.target, r.key): r for r in results if r.family == family.name}


def _code(table: pd.DataFrame) -> int | None:
    """The code the kernels take, summed over their copies; None where the mix was not read."""
    if "code_bytes" not in table or table.empty or table["code_bytes"].isna().any():
        return None
    return int(table["code_bytes"].sum())
