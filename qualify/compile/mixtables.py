"""The kernel comparison read by family and by instruction mix: the report's two summaries.

- `family_table`: one row per GPU target and kernel family (the kernel's C++ name without its
  template arguments and parameters: ``mul_mat_q``, ``flash_attn_tile``), with how many of its
  kernels failed and the sums a reviewer weighs (spills, occupancy drops, matrix and scratch
  instructions, code size) pinned → candidate. The families with failures come first, so a
  library of ten thousand kernels reads as a few dozen rows.
- `mix_table`: the kernels whose instruction mix the rules flagged (`qualify.compile.mixdiff`),
  their counts per class pinned → candidate, the worst first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qualify.checks.figures import Cell, Table
from qualify.compile.diff import KernelDiff
from qualify.compile.failurekinds import failure_rank
from qualify.compile.instmix import TITLES, Mix, shares
from qualify.core.symbols import display_name

_MIX_REASONS = ("matrix instructions", "scratch loads+stores", "code ", "mix ", "16-bit operands")
_MIX_SHOWN = (
    "instructions", "code_bytes", "matrix", "dot", "packed16", "true16_operands", "high16_operands",
    "global", "lds", "scratch_load", "scratch_store", "waits", "branches",
)  # fmt: skip
_LISTED = 200  # kernels in the mix table; the diff's Parquet file keeps them all
_NAMES = {"amdgpu": "AMDGPU", "cuda": "CUDA"}


def family_name(key: str) -> str:
    """The kernel's C++ name without template arguments, parameters or return type."""
    name = display_name(key)
    cut = min((i for i in (name.find("<"), name.find("(")) if i > 0), default=len(name))
    return name[:cut].strip().rsplit(" ", 1)[-1] or name


def _pair(before: float, after: float) -> str:
    def shown(value: float) -> str:
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"

    return shown(before) if before == after else f"{shown(before)} → {shown(after)}"


def _sum(results: Sequence[KernelDiff], side: str, field: str) -> float:
    total = 0.0
    for r in results:
        figures: Mapping[str, Any] | None = getattr(r, side)
        value = None if figures is None else figures.get(field)
        if isinstance(value, (int, float)):
            total += value
    return total


def family_table(results: Sequence[KernelDiff]) -> Table | None:
    """Per target and kernel family, its failures and summed figures (see the module)."""
    groups: dict[tuple[str, str, str], list[KernelDiff]] = {}
    for r in results:
        if r.family in _NAMES:
            groups.setdefault((r.family, r.target, family_name(r.key)), []).append(r)
    if not groups:
        return None
    spills = {"amdgpu": "vgpr_spill_count", "cuda": "spill_store_bytes"}
    rows: list[tuple[tuple[int, int, str, str, str], tuple[Cell, ...]]] = []
    for (family, target, name), members in groups.items():
        both = [r for r in members if r.pinned is not None and r.candidate is not None]
        dropped = sum(
            (r.pinned or {}).get("occupancy") is not None
            and (r.candidate or {}).get("occupancy") is not None
            and r.candidate["occupancy"] < r.pinned["occupancy"]  # type: ignore[index]
            for r in both
        )
        cells = [
            _pair(_sum(both, "pinned", f), _sum(both, "candidate", f))
            for f in (spills[family], "matrix", "scratch_load", "scratch_store", "code_bytes")
        ]
        failed = sum(r.severity == "FAIL" for r in members)
        warned = sum(r.severity == "WARN" for r in members)
        rows.append(((-failed, -warned, family, target, name), (
            _NAMES[family], target, name, len(members), failed, warned, dropped, *cells,
        )))  # fmt: skip
    rows.sort(key=lambda row: row[0])
    columns = (
        "family", "target", "kernel family", "kernels", "FAIL", "WARN", "occupancy drops",
        "spills", "matrix", "scratch loads", "scratch stores", "code B",
    )  # fmt: skip
    return Table(title=f"Kernel families ({len(rows)})", columns=columns, rows=tuple(r[1] for r in rows))


def mix_table(results: Sequence[KernelDiff]) -> Table | None:
    """The kernels the instruction-mix rules flagged, worst first (at most 200 rows)."""
    flagged = [
        r
        for r in results
        if r.family in _NAMES  # host kernels have no mix; their "code" reasons are their own
        and r.pinned is not None
        and r.candidate is not None
        and any(x.startswith(_MIX_REASONS) for x in r.reasons)
    ]
    if not flagged:
        return None
    flagged.sort(key=lambda r: (r.rank, failure_rank(r) if r.severity == "FAIL" else 0, r.family, r.key))
    rows = []
    for r in flagged[:_LISTED]:
        p, c = r.pinned or {}, r.candidate or {}
        counts = [_pair(p.get(f) or 0, c.get(f) or 0) for f in _MIX_SHOWN]
        share_p, share_c = shares(Mix.of(p)), shares(Mix.of(c))
        valu = _pair(round(share_p.get("valu", 0.0)), round(share_c.get("valu", 0.0)))
        why = "; ".join(x for x in r.reasons if x.startswith(_MIX_REASONS))
        rows.append((r.severity, _NAMES[r.family], r.target, display_name(r.key), *counts, valu, why))
    more = f", the first {_LISTED} shown" if len(flagged) > _LISTED else ""
    columns = ("severity", "family", "target", "kernel", *(TITLES[f] for f in _MIX_SHOWN), "VALU %", "why")
    return Table(
        title=f"Instruction mix: kernels flagged ({len(flagged)}{more})", columns=columns, rows=tuple(rows)
    )
