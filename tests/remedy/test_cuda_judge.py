"""The remedy on a CUDA run: the family chosen from what the compile check scanned, and the
judgement kernel by kernel on the recorded CUDA 13.0 → 13.5 run's own tables (6 993 sm_90 kernels
of libggml-cuda.so, each tied to its `.cu` file; examples/llama-cpp-cuda/recorded, the compile
stage of the H100 set continued on 2026-12-07).

The units stand in for a variant's build by what the judgement must say of them, as the AMDGPU
tests do (test_judge.py): a unit holding pinned's kernels of a file brings back its failures, one
holding the candidate's brings back none, one whose kernels spill more breaks what passed. Every
figure is the recorded run's.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from recorded_runs import unpack
from remedy_data import REPO

from qualify.core.errors import UsageError
from qualify.remedy.failing import CompileCheck, compile_check, failing_sources
from qualify.remedy.families import AMDGPU, CUDA, scanned_family
from qualify.remedy.judge import judge_variant
from qualify.remedy.units import RemedyError, read_unit

CUDA_RUN = REPO / "examples" / "llama-cpp-cuda" / "recorded" / "20261207-024207-cuda135-continued.tar.xz"
ROCM_RUN = REPO / "examples" / "llama-cpp-rocm" / "recorded" / "20261206-234850-rocm72.tar.xz"
#: The file of the kernel the bisect found flipping: mul_mat_q<Q2_K, 128, false>, 100 → 124
#: bytes of spill stores.
Q2_K = "mmq-instance-q2_k.cu"


@pytest.fixture(scope="module")
def check(tmp_path_factory: pytest.TempPathFactory) -> CompileCheck:
    run = unpack(CUDA_RUN, tmp_path_factory.mktemp("cuda"))
    return compile_check(run / "cuda135", None)


def of_file(check: CompileCheck, side: str, source: str) -> pd.DataFrame:
    """`source`'s kernels as `side` built them, as a unit would hold them."""
    table = getattr(check, side)["cuda"]
    keys = set(check.candidate["cuda"].query("source_file == @source")["key"])
    unit: pd.DataFrame = table[table["key"].isin(keys)].drop_duplicates("key").reset_index(drop=True)
    unit["source_file"] = source
    return unit


def test_a_cuda_check_is_remedied_as_cuda_with_the_spills_of_its_ptxas_reports(check: CompileCheck) -> None:
    """The family comes from the candidate's scanned tables, not a default: a CUDA run would
    otherwise be read as AMDGPU and find nothing to remedy."""
    assert check.family is CUDA
    assert check.spills_from_logs  # the plan names share/ptxas.log
    assert check.disassembler == "auto"  # the check found cuobjdump on the GPU host's PATH


def test_an_amdgpu_check_is_remedied_as_amdgpu(tmp_path: Path) -> None:
    run = unpack(ROCM_RUN, tmp_path)
    assert compile_check(run, None).family is AMDGPU


def test_a_check_of_host_kernels_alone_is_refused_naming_what_to_do(tmp_path: Path) -> None:
    """A family no remedy rebuilds is an error naming the check, the family and the way out."""
    folder = tmp_path / "20-compile" / "kernels"
    tables = {
        "amdgpu": pd.DataFrame(),
        "cuda": pd.DataFrame(),
        "host": pd.DataFrame({"key": ["ggml_vec_dot_q4_0"]}),
    }
    with pytest.raises(UsageError) as raised:
        scanned_family(folder, tables)
    assert "20-compile/kernels" in raised.value.message and "host" in raised.value.message
    assert "AMDGPU code objects or CUDA cubins" in (raised.value.hint or "")


def test_a_check_holding_both_gpu_families_is_refused(tmp_path: Path) -> None:
    tables = {"amdgpu": pd.DataFrame({"key": ["a"]}), "cuda": pd.DataFrame({"key": ["b"]})}
    with pytest.raises(UsageError, match="both AMDGPU and CUDA"):
        scanned_family(tmp_path / "20-compile" / "kernels", tables)


def test_the_failing_cuda_files_are_the_checks_own(check: CompileCheck) -> None:
    results, failing = failing_sources(check)
    counts = {f.source_file: f for f in failing}
    held = {key for f in failing for key in f.failing}
    assert held <= {r.key for r in results if r.family == "cuda" and r.severity == "FAIL"}
    assert sum(len(f.failing) for f in failing) == 64 and len(failing) == 22
    [flipping] = counts[Q2_K].failing
    assert flipping.startswith("_Z9mul_mat_qIL9ggml_type10ELi128ELb0")


def test_pinneds_kernels_of_the_q2_k_file_bring_its_spill_back(check: CompileCheck) -> None:
    [outcome] = judge_variant(check, {Q2_K: of_file(check, "pinned", Q2_K)})
    assert outcome.failing_before == outcome.recovered == 1 and outcome.newly_broken == 0
    assert outcome.missing == outcome.extra == 0
    assert outcome.code_bytes_before is not None and outcome.code_bytes_after is not None


def test_the_candidates_kernels_of_the_file_change_nothing(check: CompileCheck) -> None:
    [outcome] = judge_variant(check, {Q2_K: of_file(check, "candidate", Q2_K)})
    assert outcome.recovered == outcome.newly_broken == 0 and outcome.still_failing == 1
    assert outcome.code_change_pct == 0


def test_a_file_compiled_alone_is_matched_through_its_translation_unit_hashes(check: CompileCheck) -> None:
    """nvcc names `static` kernels by a hash of the translation unit, which a file compiled
    alone changes: the unit's kernels are still the file's, as the comparison matches them."""
    unit = of_file(check, "candidate", "unary.cu")
    internal = unit["key"].str.contains("_INTERNAL_")
    assert internal.sum() > 50
    unit["key"] = unit["key"].str.replace(r"_INTERNAL_[0-9a-f]{8}_", "_INTERNAL_0badf00d_", regex=True)
    unit["name"] = unit["key"]
    [outcome] = judge_variant(check, {"unary.cu": unit})
    assert outcome.missing == outcome.extra == 0 and outcome.kernels > 50


def test_a_unit_whose_kernels_spill_more_breaks_the_ones_that_passed(check: CompileCheck) -> None:
    unit = of_file(check, "candidate", Q2_K)
    unit["spill_store_bytes"] = unit["spill_store_bytes"] + 64
    [outcome] = judge_variant(check, {Q2_K: unit})
    assert outcome.newly_broken == outcome.kernels - outcome.failing_before > 0
    assert outcome.recovered == 0


def test_a_cuda_unit_without_its_ptxas_report_is_refused(tmp_path: Path) -> None:
    """Where the check read spill bytes from the build's ptxas reports, a unit read without its
    own would spill nothing, and bring back every spill: it is refused instead."""
    out = tmp_path / "out"
    (out / "lib").mkdir(parents=True)
    with pytest.raises(RemedyError, match="no ptxas report") as raised:
        read_unit(out, Q2_K, tmp_path / "unit", None, CUDA, spills_from_logs=True)
    assert "-Xptxas -v" in (raised.value.hint or "")
