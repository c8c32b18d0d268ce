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

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-rocm"
REMEDIES = sorted((EXAMPLE / "recorded" / "remedy").glob("*-rocm72.tar.xz"))
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    assert REMEDIES, "examples/llama-cpp-rocm/recorded/ holds no remedy"
    runs = tmp_path_factory.mktemp("runs")
    remedy = REMEDIES[-1]
    run_name = remedy.name.removesuffix(".tar.xz")
    for archive in (EXAMPLE / "recorded" / f"{run_name}.tar.xz", remedy):
        with tarfile.open(archive) as tar:
            tar.extractall(runs, filter="data")
    recorded = json.loads((runs / f"remedy-{run_name}" / "remedy-report.json").read_text())
    argv = [sys.executable, "-m", "qualify", "remedy", run_name, "--no-build", "--json"]
    argv += ["-C", str(EXAMPLE), "--runs-dir", str(runs)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return recorded, json.loads(done.stdout)


def test_the_units_judge_again_to_the_recorded_answer(judged: tuple[dict[str, Any], dict[str, Any]]) -> None:
    recorded, now = judged
    assert now["variants"] == recorded["variants"] and now["failing"] == recorded["failing"]
    assert {"true16-off", "slp-off"} <= set(now["variants"])
    for variant in now["variants"].values():
        assert variant["not_built"] == {}
        for outcome in variant["sources"]:
            assert outcome["recovered"] + outcome["still_failing"] == outcome["failing_before"]
            assert outcome["missing"] == outcome["extra"] == 0  # each unit is its file's kernels


def test_a_unit_built_as_the_arm_was_is_the_librarys_own(
    judged: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """The as-built units reproduce the candidate's kernels of their files: what a variant
    changes is its flag's doing, not the unit's way of building."""
    _, now = judged
    for outcome in now["variants"]["as-built"]["sources"]:
        assert outcome["recovered"] == outcome["newly_broken"] == 0
        assert outcome["code_change_pct"] == 0 and outcome["warn_before"] == outcome["warn_after"]


def test_the_readme_gives_the_remedys_figures(judged: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, now = judged
    text = re.sub(r"\s+", " ", (EXAMPLE / "README.md").read_text())
    failing = sum(len(f["failing"]) for f in now["failing"])
    assert f"{failing} failing kernels in {len(now['failing'])} source files" in text
    for name in ("true16-off", "slp-off"):
        totals = now["variants"][name]["totals"]
        said = (
            f"| `{name}` | {totals['recovered']} of {totals['failing_before']} | {totals['newly_broken']} |"
        )
        assert said in text, said
