"""The recorded remedy of the CUDA example, judged again from its saved units.

examples/llama-cpp-cuda/recorded/ holds the compile stage of the H100 set continued on
2026-12-07 (`20261207-024207-cuda135-continued`: libggml-cuda.so by CUDA 13.0.88 and 13.5.37,
every kernel tied to its `.cu` file), and recorded/remedy/ the folder `qualify remedy` left in
it for the candidate member: every source file holding a failing kernel compiled alone by the
example's `remedy-as-built`, `remedy-ptxas-o2` and `remedy-ptxas-o1` units (CUDA 13.5.37, sm_90,
ggml's flags), each unit's cubin read with its ptxas report and CUDA 13.5's cuobjdump. This test
unpacks both and runs `qualify remedy --no-build`: nothing is built and no CUDA tool runs, every
unit is judged again by the compile check's rules, and the answer must be the recorded one and
the README's. Nothing stands in: these are the measurements.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from remedy_recorded import (
    assert_as_built_reproduces,
    assert_judged_as_recorded,
    assert_readme_figures,
    rejudge_remedy,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
RUN = "20261207-024207-cuda135-continued"
REMEDY = EXAMPLE / "recorded" / "remedy" / f"{RUN}.tar.xz"
#: The kernel the bisect found flipping at nvcc 13.2.51: mul_mat_q<Q2_K, 128, false>.
FLIPPING = "_Z9mul_mat_qIL9ggml_type10ELi128ELb0"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    archives = (EXAMPLE / "recorded" / f"{RUN}.tar.xz", REMEDY)
    return rejudge_remedy(archives, tmp_path_factory.mktemp("runs"), f"{RUN}/cuda135", EXAMPLE)


def test_the_units_judge_again_to_the_recorded_answer(judged: tuple[dict[str, Any], dict[str, Any]]) -> None:
    recorded, now = judged
    assert_judged_as_recorded(recorded, now)
    assert set(now["variants"]) == {"as-built", "ptxas-o2", "ptxas-o1"}
    failing = {f["source_file"] for f in now["failing"]}
    for variant in now["variants"].values():
        assert {o["source_file"] for o in variant["sources"]} == failing  # every failing file rebuilt


def test_a_unit_built_as_the_arm_was_is_the_librarys_own(
    judged: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The as-built units reproduce the candidate's kernels of their files, spills and code
    bytes included, though read on another host by another cuobjdump: what a variant changes is
    its flag's doing, not the unit's way of building or reading."""
    assert_as_built_reproduces(judged[1])


def test_ptxas_o1_brings_back_the_spill_the_bisect_found(
    judged: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    _, now = judged
    [q2_k] = [o for o in now["variants"]["ptxas-o1"]["sources"] if o["source_file"] == "mmq-instance-q2_k.cu"]
    assert [k[: len(FLIPPING)] for k in q2_k["recovered_kernels"]] == [FLIPPING]


def test_the_readme_gives_the_remedys_figures(judged: tuple[dict[str, Any], dict[str, Any]]) -> None:
    assert_readme_figures(EXAMPLE, judged[1], ("as-built", "ptxas-o2", "ptxas-o1"))
