"""CUDA stubs — kernels whose code only prints and traps — are set apart, told from kernels that
work, on cubins nvcc builds here from tests/compile/kernels/cuda/stubs.cu (ggml's
`NO_DEVICE_CODE` pattern, a bare trap, a trap a branch goes round, an assert, a print), read by
the check's own scan with its instruction mix from cuobjdump (nvdisasm and cuobjdump from
NVIDIA's wheels, `cuda_wheels`). The traps it counts are held to nvdisasm's JSON of the same
cubin. The real ggml kernels are in tests/compile/test_cuda_ggml.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from cuda_wheels import find_nvcc, find_nvdisasm
from test_sass_mix import find_cuobjdump, plain_name

from qualify.compile.diff import KernelDiff, Limits, diff
from qualify.compile.disassembly import probe
from qualify.compile.instmix import TRAPS
from qualify.compile.mixreading import MixReading
from qualify.compile.sassmix import SASS_OPTIONS
from qualify.compile.scan import scan
from qualify.compile.stubs import figures_stub

SOURCE = Path(__file__).parent / "kernels" / "cuda" / "stubs.cu"
STUBS = {"mul_mat<64>", "mul_mat<128>", "trap_only"}


def build(root: Path, *flags: str) -> dict[str, pd.DataFrame]:
    """stubs.cu for sm_90 in `root`, scanned as the check scans it, with its instruction mix
    (and traps) from cuobjdump; the traps are held to nvdisasm's JSON of the same cubin."""
    env = {**os.environ, "NVDISASM_PATH": str(find_nvdisasm().parent)}
    root.mkdir(parents=True)
    cubin = root / "stubs.cubin"
    argv = [find_nvcc(), "-O3", "-cubin", "-arch=sm_90", *flags, str(SOURCE), "-o", str(cubin)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    decoded = subprocess.run(
        [str(find_nvdisasm()), "-json", str(cubin)], capture_output=True, text=True, env=env
    )
    assert decoded.returncode == 0, decoded.stderr[-2000:]
    unguarded = {
        str(f["function-name"]): sum(
            1 for i in f["sass-instructions"] if i["opcode"] == "BPT.TRAP" and not i.get("predicate")
        )
        for f in json.loads(decoded.stdout)[1]
    }
    reading = MixReading(cuda=probe([find_cuobjdump()], SASS_OPTIONS, env), folder=root.parent)
    try:
        tables = scan(root, host_patterns=(), mix=reading).tables
    finally:
        reading.close()
    assert dict(zip(tables["cuda"]["name"], tables["cuda"][TRAPS], strict=True)) == unguarded
    return tables


def mixes(tables: dict[str, pd.DataFrame]) -> dict[str, dict[str, object]]:
    """Each kernel's row by its plain name."""
    return {_named(str(row["name"])): row for row in tables["cuda"].to_dict("records")}


def _named(mangled: str) -> str:
    """`_Z7mul_matILi64EEvPKfPfi` -> `mul_mat<64>`; plain kernels by their plain name."""
    if mangled.startswith("_Z7mul_matILi"):
        return f"mul_mat<{mangled.removeprefix('_Z7mul_matILi').split('E')[0]}>"
    return plain_name(mangled)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, pd.DataFrame]]:
    root = tmp_path_factory.mktemp("cuda-stubs")
    return {"stub": build(root / "stub"), "real": build(root / "real", "-DWITH_MUL_MAT")}


def test_a_kernel_that_only_prints_and_traps_is_a_stub(builds: dict[str, dict[str, pd.DataFrame]]) -> None:
    stub, real = mixes(builds["stub"]), mixes(builds["real"])
    assert {name for name, row in stub.items() if figures_stub(row)} == STUBS
    # ggml's pattern: its arguments for the printf on its stack, the call, then the trap.
    for name in ("mul_mat<64>", "mul_mat<128>"):
        assert stub[name][TRAPS] == 1 and stub[name]["scratch_store"] and stub[name]["global"] == 0
        assert not figures_stub(real[name]) and real[name]["global"]  # with its code it loads
    # A trap a branch goes round is counted, but the path round it works: global memory.
    assert stub["guarded"][TRAPS] == 1 and stub["guarded"]["global"] and not figures_stub(stub["guarded"])
    assert not figures_stub(stub["assert_only"]) and not figures_stub(stub["print_only"])


def test_stubs_are_set_apart_and_real_code_that_became_one_fails(
    builds: dict[str, dict[str, pd.DataFrame]],
) -> None:
    def by_name(results: list[KernelDiff]) -> dict[str, KernelDiff]:
        return {_named(r.key): r for r in results}

    both = by_name(diff(builds["stub"], builds["stub"], Limits()))
    assert {k for k, r in both.items() if r.severity == "stub"} == STUBS
    lost = by_name(diff(builds["real"], builds["stub"], Limits()))
    for name in ("mul_mat<64>", "mul_mat<128>"):
        assert lost[name].severity == "FAIL", lost[name]
        assert lost[name].reasons[0].startswith("stub in the candidate (its code does no work")
    # Tables saved before traps were counted judge every kernel as before.
    unread = {
        family: table.drop(columns=[TRAPS], errors="ignore") for family, table in builds["stub"].items()
    }
    assert not any(r.severity == "stub" for r in diff(unread, unread, Limits()))
