"""The kernel comparison as report tables and as one flat DataFrame (saved as Parquet).

Tables list changed kernels first, most severe first; unchanged kernels and stubs (kernels whose
code does no work, `qualify.compile.stubs`) go to tables of their own that the report shows
closed. A cell shows `pinned → candidate` when the two differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from qualify.checks.figures import Cell, Table
from qualify.compile.diff import KernelDiff
from qualify.compile.instmix import MIX_COLUMNS, TRAPS
from qualify.compile.scan import FAMILIES
from qualify.compile.stubs import figures_stub

# (column title, field) per family; the figures a reviewer compares, in the metadata's names.
_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "amdgpu": (
        ("VGPRs", "vgpr_count"),
        ("AGPRs", "agpr_count"),
        ("SGPRs", "sgpr_count"),
        ("VGPR spills", "vgpr_spill_count"),
        ("SGPR spills", "sgpr_spill_count"),
        ("scratch B", "private_segment_fixed_size"),
        ("LDS B", "group_segment_fixed_size"),
        ("wave", "wavefront_size"),
        ("waves/SIMD", "occupancy"),
    ),
    "cuda": (
        ("registers", "registers"),
        ("stack B", "stack"),
        ("local B", "local"),
        ("shared B", "shared"),
        ("spill stores B", "spill_store_bytes"),
        ("spill loads B", "spill_load_bytes"),
        ("warps/SM", "occupancy"),
    ),
    "host": (("code B", "code_size"), ("stack B", "stack_bytes")),
}
_TITLES = {"amdgpu": "AMDGPU kernels", "cuda": "CUDA kernels", "host": "Host kernels"}


def _cell(diff: KernelDiff, field: str) -> str:
    before = None if diff.pinned is None else diff.pinned.get(field)
    after = None if diff.candidate is None else diff.candidate.get(field)
    if diff.pinned is None:
        return "" if after is None else f"— → {after}"
    if diff.candidate is None:
        return "" if before is None else f"{before} → —"
    if before == after:
        return "" if before is None else str(before)
    return f"{'?' if before is None else before} → {'?' if after is None else after}"


def _copies(diff: KernelDiff) -> str:
    before = diff.pinned["copies"] if diff.pinned else 0
    after = diff.candidate["copies"] if diff.candidate else 0
    return str(before) if before == after else f"{before} → {after}"


def kernel_tables(results: Sequence[KernelDiff]) -> list[Table]:
    """Per family present: changed kernels (severity first), then the unchanged ones, closed."""
    tables = []
    for family in FAMILIES:
        rows = [r for r in results if r.family == family]
        if not rows:
            continue
        fields = _FIELDS[family]
        target = () if family == "host" else ("target",)
        columns = ("severity", *target, "kernel", "copies", *(title for title, _ in fields), "why")

        def row(
            r: KernelDiff, fields: tuple[tuple[str, str], ...] = fields, host: bool = family == "host"
        ) -> tuple[Any, ...]:
            lead = (r.severity,) if host else (r.severity, r.target)
            cells = tuple(_cell(r, field) for _, field in fields)
            return (*lead, r.key, _copies(r), *cells, "; ".join(r.reasons))

        changed = [row(r) for r in rows if r.severity not in ("same", "stub")]
        same = [row(r) for r in rows if r.severity == "same"]
        stubs = [row(r) for r in rows if r.severity == "stub"]
        tables.append(
            Table(title=f"{_TITLES[family]}: changed ({len(changed)})", columns=columns, rows=tuple(changed))
        )
        for what, kept in (("unchanged", same), ("stubs set apart", stubs)):
            if kept:
                title = f"{_TITLES[family]}: {what} ({len(kept)})"
                tables.append(Table(title=title, columns=columns, rows=tuple(kept), collapsed=True))
    return tables


def counts_table(counts: dict[str, dict[str, int]], results: Sequence[KernelDiff]) -> Table:
    """Kernel copies found per role and family, how the matched kernels were judged, and the
    stubs each side has (`qualify.compile.stubs`), set apart from the judgement."""
    rows: list[tuple[Cell, ...]] = []
    for family in FAMILIES:
        mine = [r for r in results if r.family == family]
        found = [counts.get(role, {}).get(family, 0) for role in ("pinned", "candidate")]
        if not mine and not any(found):
            continue
        by = {s: sum(r.severity == s for r in mine) for s in ("FAIL", "ERROR", "WARN", "INFO", "same")}
        stubs = [sum(figures_stub(getattr(r, role)) for r in mine) for role in ("pinned", "candidate")]
        rows.append((family, *found, len(mine), *by.values(), *stubs))
    return Table(
        title="Kernels found and judged",
        columns=(
            "family",
            "pinned copies",
            "candidate copies",
            "distinct",
            "FAIL",
            "ERROR",
            "WARN",
            "INFO",
            "unchanged",
            "pinned stubs",
            "candidate stubs",
        ),
        rows=tuple(rows),
    )


#: Each family's instruction-mix columns in the diff frame (CUDA's traps beside its mix).
_MIX: dict[str, tuple[str, ...]] = {"amdgpu": MIX_COLUMNS, "cuda": (*MIX_COLUMNS, TRAPS), "host": ()}


def diff_frame(results: Sequence[KernelDiff]) -> pd.DataFrame:
    """One row per kernel: family, target, key, severity, reasons, then pinned_* and candidate_*."""
    records: list[dict[str, Any]] = []
    for r in results:
        record: dict[str, Any] = {
            "family": r.family,
            "target": r.target,
            "key": r.key,
            "severity": r.severity,
            "reasons": "; ".join(r.reasons),
        }
        for side, figures in (("pinned", r.pinned), ("candidate", r.candidate)):
            for field in (*(f for _, f in _FIELDS[r.family]), *_MIX[r.family], "copies"):
                record[f"{side}_{field}"] = None if figures is None else figures.get(field)
        records.append(record)
    columns = ["family", "target", "key", "severity", "reasons"]
    return pd.DataFrame(records, columns=columns if not records else None).convert_dtypes()
