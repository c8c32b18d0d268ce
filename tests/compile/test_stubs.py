"""Stubs — kernels whose code does no work — are set apart from the kernel comparison.

Two sources, nothing invented: code objects clang-19 builds here from tests/compile/kernels/
stubs.hip (ggml's `NO_DEVICE_CODE` pattern, a bare trap, an empty kernel, a kernel that does its
work in a function it calls), read by the check's own scan and llvm-objdump-19; and the ROCm
example's recorded gfx1151 run, whose saved tables hold every kernel of libggml-hip.so with its
instruction mix as ROCm 6.4 and 7.2 built it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from evidence_files import unpacked

from qualify.compile.diff import KernelDiff, Limits, diff
from qualify.compile.disassembly import probe
from qualify.compile.failurekinds import failure_kinds
from qualify.compile.instmix import Mix
from qualify.compile.mixreading import OBJDUMP_OPTIONS, MixReading
from qualify.compile.scan import scan
from qualify.compile.stubs import is_stub
from qualify.core.environment import child_env

KERNELS = Path(__file__).parent / "kernels"
RECORDED = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp-rocm" / "recorded"
TOOLS = ["clang++-19", "llvm-objdump-19"]
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
HIP = [
    "-x", "hip", "--offload-arch=gfx1151", "-nogpulib", "-nogpuinc", "-O3",
    # ggml prints through hostcall printf, which needs the device libraries; buffered printf
    # needs only `__printf_alloc`, which the source defines. The kernels' own code is the same.
    "-mprintf-kind=buffered", "--cuda-device-only", "--no-gpu-bundle-output",
]  # fmt: skip
MUL_MAT = ("_Z7mul_matILi64EEvPKfPfi", "_Z7mul_matILi128EEvPKfPfi")


def build(root: Path, *flags: str) -> dict[str, pd.DataFrame]:
    """stubs.hip compiled for gfx1151 into `root`, scanned with its instruction mix."""
    root.mkdir(parents=True)
    proc = subprocess.run(
        ["clang++-19", *HIP, *flags, str(KERNELS / "stubs.hip"), "-o", str(root / "stubs.co")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    reading = MixReading(amdgpu=probe(["llvm-objdump-19"], OBJDUMP_OPTIONS, child_env()), folder=root.parent)
    try:
        return scan(root, host_patterns=(), mix=reading).tables
    finally:
        reading.close()


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, pd.DataFrame]]:
    if MISSING:
        pytest.skip(f"needs {', '.join(MISSING)}")
    base = tmp_path_factory.mktemp("stubs")
    return {"stub": build(base / "stub"), "real": build(base / "real", "-DWITH_MUL_MAT")}


def mixes(table: pd.DataFrame) -> dict[str, Mix]:
    return {row["name"]: Mix.of(row) for row in table.to_dict("records")}


def by_key(results: list[KernelDiff]) -> dict[str, KernelDiff]:
    return {r.key: r for r in results}


def test_a_kernel_that_only_calls_traps_or_ends_is_a_stub(builds: dict[str, dict[str, pd.DataFrame]]) -> None:
    stub, real = mixes(builds["stub"]["amdgpu"]), mixes(builds["real"]["amdgpu"])
    for name in (*MUL_MAT, "trap_only", "empty"):
        assert stub[name].read and is_stub(stub[name]), (name, stub[name])
    # The NO_DEVICE_CODE stub is a call: scalar and vector moves for its arguments, one branch.
    for name in MUL_MAT:
        assert stub[name].branches == 1 and stub[name].salu > 0, stub[name]
        assert not is_stub(real[name]), real[name]  # with its code, the kernel loads and computes
    # Work in a callee: the kernel reads its arguments (scalar loads) to pass them on.
    assert real["forward"].smem > 0 and not is_stub(real["forward"])
    assert not is_stub(stub["forward"])


def test_stubs_on_both_sides_are_set_apart_never_judged(builds: dict[str, dict[str, pd.DataFrame]]) -> None:
    results = by_key(diff(builds["stub"], builds["stub"], Limits()))
    for name in (*MUL_MAT, "trap_only", "empty"):
        assert results[name].severity == "stub", results[name]
        assert results[name].reasons[0].startswith("stub in both builds")
    assert results["forward"].severity == "same"


def test_real_code_that_became_a_stub_fails(builds: dict[str, dict[str, pd.DataFrame]]) -> None:
    results = by_key(diff(builds["real"], builds["stub"], Limits()))
    for name in MUL_MAT:
        kernel = results[name]
        assert kernel.severity == "FAIL", kernel
        assert kernel.reasons[0].startswith("stub in the candidate (its code does no work")
        assert "instructions of real code" in kernel.reasons[0]
        assert failure_kinds(kernel) == ["are stubs in the candidate (real code in pinned)"]


def test_a_stub_that_became_real_code_warns(builds: dict[str, dict[str, pd.DataFrame]]) -> None:
    results = by_key(diff(builds["stub"], builds["real"], Limits()))
    for name in MUL_MAT:
        kernel = results[name]
        assert kernel.severity == "WARN", kernel
        assert kernel.reasons == (
            f"stub in pinned, real code in the candidate ({Mix.of(kernel.candidate or {}).instructions} "
            "instructions): nothing to compare it with",
        )


def test_a_kernel_whose_mix_was_not_read_is_never_a_stub(builds: dict[str, dict[str, pd.DataFrame]]) -> None:
    unread = {family: table.copy() for family, table in builds["stub"].items()}
    unread["amdgpu"]["instructions"] = pd.NA
    assert not any(r.severity == "stub" for r in diff(unread, unread, Limits()))
    # Read on one side only: the other may be either, so the rules judge the kernel.
    assert not any(r.severity in ("stub", "FAIL") for r in diff(builds["stub"], unread, Limits()))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[KernelDiff], pd.DataFrame]:
    """The recorded gfx1151 run's tables compared again, and the comparison it saved."""
    archive = RECORDED / "20261205-081523-rocm72.tar.xz"  # saved before stubs were set apart
    where = tmp_path_factory.mktemp("recorded")
    files = unpacked(archive, where, lambda name: "kernel-resources/" in name and name.endswith(".parquet"))
    check = next(f.parent for f in files if f.name == "diff.parquet")
    tables = {
        role: {
            family: pd.read_parquet(check / role / f"{family}.parquet")
            for family in ("amdgpu", "cuda", "host")
        }
        for role in ("pinned", "candidate")
    }
    return diff(tables["pinned"], tables["candidate"], Limits()), pd.read_parquet(check / "diff.parquet")


def test_the_recorded_40_to_41_vgpr_warnings_are_stubs(
    recorded: tuple[list[KernelDiff], pd.DataFrame],
) -> None:
    results, saved = recorded
    now = {r.key: r for r in results}
    # The run as recorded, before stubs were set apart: 797 WARNs for a 40 → 41 VGPR step.
    grew = saved[saved["reasons"] == "VGPRs 40 → 41 (keeps occupancy)"]
    assert len(grew) == 797 and set(grew["severity"]) == {"WARN"}
    assert {now[key].severity for key in grew["key"]} == {"stub"}
    # What marks them, in the run's own counts: no memory, no wait, one branch, a few moves.
    for side in ("pinned", "candidate"):
        for column in ("global", "flat", "buffer", "smem", "lds", "scratch_load", "scratch_store", "waits"):
            assert (grew[f"{side}_{column}"] == 0).all(), (side, column)
        assert (grew[f"{side}_branches"] == 1).all()
        assert grew[f"{side}_instructions"].between(7, 9).all()
    stubs = [r for r in results if r.severity == "stub"]
    both = Counter(r.reasons[0].split(" (")[0] for r in stubs)
    assert both == {"stub in both builds": 2333}  # the 797, and 1536 whose VGPRs went 37 → 40
    assert Counter(saved.set_index("key").loc[[r.key for r in stubs], "reasons"]) == {
        "VGPRs 40 → 41 (keeps occupancy)": 797,
        "VGPRs 37 → 40 (keeps occupancy)": 1536,
    }
    # No failing kernel was a stub; what stays judged is the rest.
    assert Counter(r.severity for r in results) == {
        "FAIL": 254, "WARN": 3052 - 2333, "INFO": 2413, "same": 831, "stub": 2333,
    }  # fmt: skip
