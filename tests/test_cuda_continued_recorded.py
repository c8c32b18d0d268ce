"""The CUDA example's H100 decide-servers set of 2026-12-07, continued on a second H100 lease:
its compile stage, and the bench that found servers dying with the thread that started them.

examples/llama-cpp-cuda/recorded/20261207-024207-cuda135-continued.tar.xz holds what the second
lease added to the set of `test_cuda_soak_recorded.py`: the compile stage of every member and
the bench's folder, with the run records and the seal (the stages the first lease ran are in
that set's own archive). Its bench ran twice. The first attempt's servers were killed as soon as
the pool thread that started them ended (bubblewrap's --die-with-parent follows the starting
thread): every member's bench is that attempt's ERROR. The second, with qualify starting
children from a thread that lasts (`tests/core/test_started_from_a_thread.py`), measured nine
blocks of four resident servers before the lease ended, so no member's bench has a verdict from
it. CI has no GPU: this test unpacks the archive, re-judges it with the example's plan and checks
what the example's README says of it. Nothing stands in for anything.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from recorded_runs import Rejudge, unpack
from recorded_runs import check_result as result

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
ARCHIVE = EXAMPLE / "recorded" / "20261207-024207-cuda135-continued.tar.xz"
README = EXAMPLE / "README.md"
ROLES = ("pinned", "cuda135", "positive-pinned", "negative-ub256")


@pytest.fixture(scope="module")
def rejudged(rejudge_recorded: Rejudge, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return rejudge_recorded(EXAMPLE, unpack(ARCHIVE, tmp_path_factory.mktemp("recorded")))


def test_the_compile_stage_fails_the_candidate_and_passes_the_aa_control(rejudged: Path) -> None:
    kernels = result(rejudged, "cuda135", "20-compile", "kernel-resources")
    assert kernels["verdict"] == "FAIL"
    assert kernels["reason"].startswith("89 CUDA kernels fail: 16 spill more")
    assert "6543 CUDA kernels compared" in kernels["reason"]
    assert result(rejudged, "positive-pinned", "20-compile", "kernel-resources")["verdict"] == "PASS"
    for member in ("cuda135", "positive-pinned"):
        tests = result(rejudged, member, "20-compile", "operator-tests")
        assert tests["verdict"] == "PASS" and "9/9 passed" in tests["reason"]
    text = README.read_text()
    assert "compile on the H100: cuda135 **FAIL**, 89 of 6 543 kernels" in text


def test_the_first_bench_lost_its_servers_with_their_starting_thread(rejudged: Path) -> None:
    for member in ("cuda135", "positive-pinned", "negative-ub256"):
        stage = json.loads((rejudged / member / "60-bench" / "stage.json").read_text())
        assert stage["verdict"] == "ERROR" and stage["attempt"] == 1
        assert "/tokenize failed (its server exited)" in stage["reason"]


def test_the_second_bench_kept_four_servers_resident_through_nine_blocks(rejudged: Path) -> None:
    folder = rejudged / "60-bench" / "llama-bench"
    units = [json.loads(line) for line in (folder / "units.jsonl").read_text().splitlines()]
    pairs = [u for u in units if u["phase"] == "pair"]
    assert len(pairs) == 36 and all(u["ok"] for u in units)
    assert {u["role"] for u in pairs} == set(ROLES)
    assert all(u["server"]["total_slots"] == 1 for u in pairs)
    for role in ROLES:
        samples = pd.read_parquet(folder / role / "samples.parquet")
        assert set(samples["test"]) == {"pp2048", "tg128"} and samples["pair"].nunique() == 9
    medians = {gpu["sm_mhz"][1] for u in pairs for gpu in u["gpu"]["gpus"].values()}
    assert medians == {1980.0}  # the SM clock's median in every unit
