"""The recorded ROCm 6.4 → 7.2 run's compile check as the remedy tests use it (see test_judge.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from recorded_runs import unpack

from qualify.compile.diff import Limits, diff
from qualify.compile.scan import load_tables
from qualify.remedy.failing import CompileCheck

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "examples" / "llama-cpp-rocm" / "recorded" / "20261205-081523-rocm72.tar.xz"


def recorded_check(where: Path) -> CompileCheck:
    """The recorded run's compile check, unpacked under `where`, each code object named as its
    source would be and the one with the most failing kernels `worst.cu`."""
    run = unpack(RECORDED, where)
    folder = run / "20-compile" / "kernel-resources"
    check = CompileCheck(
        run, folder, folder.name, Limits(), load_tables(folder / "pinned"), load_tables(folder / "candidate")
    )
    results = diff(check.pinned, check.candidate, check.limits)
    failing = {r.key for r in results if r.severity == "FAIL"}
    table = check.candidate["amdgpu"]
    # Each code object named as its source would be; the one with the most failing kernels
    # `worst.cu`.
    worst = table[table["key"].isin(failing)]["origin"].value_counts().index[0]
    for side in (check.pinned["amdgpu"], table):
        side["source_file"] = side["origin"].where(side["origin"] != worst, "worst.cu")
    return check


def unit_like(check: CompileCheck, side: str) -> pd.DataFrame:
    """The worst file's kernels as `side` built them, as a unit would hold them."""
    table = getattr(check, side)["amdgpu"]
    keys = set(check.candidate["amdgpu"].query("source_file == 'worst.cu'")["key"])
    unit: pd.DataFrame = table[table["key"].isin(keys)].drop_duplicates("key").reset_index(drop=True)
    unit["source_file"] = "worst.cu"
    return unit
