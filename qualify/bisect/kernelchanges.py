"""What a `kernel-resources` gate shows of a step, read from the check's saved comparison
(`diff.parquet` in its folder, one row per kernel: pinned_* and candidate_* figures, written by
`qualify.compile.tables.diff_frame`): the counts that decide it, and, between the last good and
the first bad step, the kernels whose candidate figures changed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from qualify.checks.evidence import Evidence
from qualify.core.symbols import display_name
from qualify.records.bisect import KernelFigure
from qualify.records.compile import KernelFacts

#: The check's saved comparison, in its folder (`qualify.compile.kind`).
DIFF = "diff.parquet"
KIND = "kernel-resources"
#: The figures whose growth is a spill: VGPR spills (AMD), spill stores (CUDA).
SPILLS = ("vgpr_spill_count", "spill_store_bytes")
#: The most kernels bisect.md lists; the rest are counted.
LISTED = 50
_KEY = ["family", "target", "key"]


def _read(check_dir: Path) -> pd.DataFrame | None:
    path = check_dir / DIFF
    try:
        return pd.read_parquet(path) if path.is_file() else None
    except (OSError, ValueError):
        return None  # not a table pandas reads: the step shows no counts, its verdict stands


def _numbers(frame: pd.DataFrame, column: str) -> pd.Series:
    if column not in frame.columns:
        return pd.Series([float("nan")] * len(frame), index=frame.index, dtype="float64")
    return pd.to_numeric(frame[column], errors="coerce").astype("float64")


def kernel_figure(check_dir: Path, facts: Evidence | None) -> KernelFigure:
    """The counts that decide a kernel-resources step: kernels whose spills are new or grew,
    kernels that lose occupancy (both absent without a saved comparison), and the kernels the
    judge failed (its saved facts, None when its judge wrote none)."""
    failing = facts.kernels_by_severity.FAIL if isinstance(facts, KernelFacts) else None
    frame = _read(check_dir)
    if frame is None:
        return KernelFigure(failing=failing)
    spilling = pd.Series(False, index=frame.index)
    for field in SPILLS:
        spilling |= _numbers(frame, f"candidate_{field}") > _numbers(frame, f"pinned_{field}").fillna(0)
    lost = _numbers(frame, "candidate_occupancy") < _numbers(frame, "pinned_occupancy")
    return KernelFigure(spilling=int(spilling.sum()), losing_occupancy=int(lost.sum()), failing=failing)


def changed_kernels(good_dir: Path, bad_dir: Path) -> list[str] | None:
    """Each kernel whose candidate figures differ between the two steps' comparisons, as
    `family target kernel: field a → b, …` (a kernel only one step has: `absent`); None when
    either step saved no comparison."""
    good, bad = _read(good_dir), _read(bad_dir)
    if good is None or bad is None:
        return None
    fields = sorted(
        {c for f in (good, bad) for c in f.columns if c.startswith("candidate_") and c != "candidate_copies"}
    )
    merged = pd.merge(
        good.reindex(columns=[*_KEY, *fields]),
        bad.reindex(columns=[*_KEY, *fields]),
        on=_KEY,
        how="outer",
        suffixes=(" good", " bad"),
        indicator=True,
    )
    lines = []
    for cells in merged.sort_values(_KEY, na_position="first").to_dict("records"):
        # The kernel as a reviewer reads it (`mul_mat_q<(ggml_type)10, 128, false, …>`), not
        # its mangled name.
        shown = {k: display_name(_shown(cells[k])) if k == "key" else _shown(cells[k]) for k in _KEY}
        where = " ".join(v for v in shown.values() if v not in ("—", ""))
        if cells["_merge"] != "both":
            gone = "first bad" if cells["_merge"] == "left_only" else "last good"
            lines.append(f"{where}: absent at the {gone} step")
            continue
        changes = []
        for field in fields:
            before, after = _shown(cells[f"{field} good"]), _shown(cells[f"{field} bad"])
            if before != after:
                changes.append(f"{field.removeprefix('candidate_')} {before} → {after}")
        if changes:
            lines.append(f"{where}: " + ", ".join(changes))
    return lines


def _shown(value: Any) -> str:
    # A figure one side lacks reads back as NA (pandas' missing value): shown as "—".
    return (
        "—"
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))
        else str(value)
    )
