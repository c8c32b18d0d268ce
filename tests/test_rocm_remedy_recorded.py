"""The recorded remedy of the ROCm example, judged again from its saved units.

examples/llama-cpp-rocm/recorded/ holds a run of `qualify run --candidate rocm72 --no-gate` of
the whole gfx1151 library, whose compile check ties every kernel to its source file, and the
folder `qualify remedy` left beside it: every source file holding a failing kernel rebuilt by the
example's `remedy-true16-off` and `remedy-slp-off` units (and a few by `remedy-as-built`), each
unit's kernels read with the candidate's llvm-objdump. This test unpacks both and runs
`qualify remedy --no-build`: nothing is built, every unit is judged again by the compile check's
rules, and the answer must be the recorded one and the README's. Nothing stands in: these are the
host's measurements.
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

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-rocm"
REMEDIES = sorted((EXAMPLE / "recorded" / "remedy").glob("*-rocm72.tar.xz"))
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    assert REMEDIES, "examples/llama-cpp-rocm/recorded/ holds no remedy"
    remedy = REMEDIES[-1]
    run_name = remedy.name.removesuffix(".tar.xz")
    archives = (EXAMPLE / "recorded" / f"{run_name}.tar.xz", remedy)
    return rejudge_remedy(archives, tmp_path_factory.mktemp("runs"), run_name, EXAMPLE)


def test_the_units_judge_again_to_the_recorded_answer(judged: tuple[dict[str, Any], dict[str, Any]]) -> None:
    recorded, now = judged
    assert_judged_as_recorded(recorded, now)
    assert {"true16-off", "slp-off"} <= set(now["variants"])


def test_a_unit_built_as_the_arm_was_is_the_librarys_own(
    judged: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The as-built units reproduce the candidate's kernels of their files: what a variant
    changes is its flag's doing, not the unit's way of building."""
    assert_as_built_reproduces(judged[1])


def test_the_readme_gives_the_remedys_figures(judged: tuple[dict[str, Any], dict[str, Any]]) -> None:
    assert_readme_figures(EXAMPLE, judged[1], ("true16-off", "slp-off"))
