"""The recorded bisect of the CUDA example's compile gate, re-decided from its saved data.

examples/llama-cpp-cuda/recorded/ holds the folder of `qualify bisect nvcc --gate
compile/kernel-resources -C examples/llama-cpp-cuda/bisect` run on a 2-core x86-64 host (nvcc
needs no GPU): every nvcc release from 13.0.88 to 13.5.37 a step, each step the kernel slice its
release compiles, built through nix and compared with 13.0.88's. This test unpacks it,
re-judges every probed step's run with the plan (`qualify report --rejudge`, no rebuild), reads
the gate from each step as the bisect does and runs the search again on those outcomes: the
same probes, the same answer. The figures at the flip are checked against what NVIDIA's own
cuobjdump (`--dump-resource-usage`, 13.5.37) printed for the same cubins when the bisect was
recorded, saved beside the archive. Nothing stands in: these are the host's compiles.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from recorded_runs import rejudge, unpack

from qualify.bisect.answers import Answer, Finding
from qualify.bisect.gate import Gate, judge_step
from qualify.bisect.outcomes import Outcome
from qualify.bisect.search import bisect_next, series_next

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
PROJECT = EXAMPLE / "bisect"
RECORDED = EXAMPLE / "recorded" / "bisect"
GATE = Gate("compile", "20-compile", "kernel-resources")
#: What the README says the bisect found.
LAST_GOOD, FIRST_BAD = "nvcc-13.1.115", "nvcc-13.2.51"


def archives(mode: str) -> list[Path]:
    return sorted(RECORDED.glob(f"*-{mode}-nvcc.tar.xz"))


@pytest.fixture(scope="module", params=["bisect"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    found = archives(request.param)
    assert found, f"{RECORDED} holds no {request.param} archive"
    folder = unpack(found[-1], tmp_path_factory.mktemp(request.param))
    for run in runs(folder):
        rejudge(PROJECT, run)
    return folder


def runs(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "steps").glob("*/*") if (p / "run.json").is_file())


def state(folder: Path) -> dict[str, Any]:
    saved: dict[str, Any] = json.loads((folder / "bisect.json").read_text())
    return saved


def run_of(folder: Path, probe: dict[str, Any]) -> Path:
    """The probe's run folder in the unpacked copy (the evidence names where it was recorded)."""
    index = state(folder)["series"].index(probe["step"])
    return folder / "steps" / f"{index:02d}-{probe['step']}" / Path(probe["evidence"]["run"]).name


def test_every_step_rejudged_reads_as_recorded_and_the_search_ends_the_same(recorded: Path) -> None:
    saved = state(recorded)
    series, retries = saved["series"], saved["retries"]
    known: list[list[Outcome]] = [[] for _ in series]
    for probe in saved["probes"]:
        measured = judge_step(run_of(recorded, probe), GATE)
        assert measured.outcome.value == probe["outcome"], probe["step"]
        assert measured.evidence["figure"] == probe["evidence"]["figure"], probe["step"]
        known[series.index(probe["step"])].append(measured.outcome)
    if saved["mode"] == "series":
        answer = series_next(known, retries)
        assert isinstance(answer, Answer) and answer.finding is Finding.SERIES, answer
        bad = answer.outcomes.index(Outcome.BAD)
        assert answer.outcomes[bad - 1] is Outcome.GOOD
        assert (series[bad - 1], series[bad]) == (LAST_GOOD, FIRST_BAD)
        return
    answer = bisect_next(known, retries)
    assert isinstance(answer, Answer), f"the recorded probes leave step {answer} to probe"
    assert answer.finding is Finding.FOUND and answer.good is not None and answer.bad is not None
    assert (series[answer.good], series[answer.bad]) == (LAST_GOOD, FIRST_BAD)


def test_the_flip_is_stated_in_the_examples_readme() -> None:
    readme = (EXAMPLE / "README.md").read_text()
    assert f"first bad: {FIRST_BAD}" in readme and f"last good: {LAST_GOOD}" in readme


def cuobjdump(path: Path) -> dict[str, tuple[int, int]]:
    """Function name -> (REG, STACK) from saved `cuobjdump --dump-resource-usage` output."""
    found = re.findall(r"Function (\S+):\n\s+REG:(\d+) STACK:(\d+)", path.read_text())
    return {name: (int(reg), int(stack)) for name, reg, stack in found}


@pytest.mark.parametrize("step", [LAST_GOOD, FIRST_BAD])
def test_the_figures_at_the_flip_are_cuobjdumps(step: str, tmp_path: Path) -> None:
    """Registers and stack frame of every kernel at both sides of the flip, as qualify read them
    from the cubins, equal cuobjdump's for the same cubins (spills are ptxas's alone)."""
    folder = unpack(archives("bisect")[-1], tmp_path)
    saved = state(folder)
    probe = next(p for p in saved["probes"] if p["step"] == step)
    diff = pd.read_parquet(run_of(folder, probe) / GATE.folder / str(GATE.check) / "diff.parquet")
    dumped = cuobjdump(RECORDED / f"cuobjdump-{step}.txt")
    assert len(dumped) >= 400, len(dumped)
    rows = diff[diff["key"].isin(dumped)]
    assert len(rows) >= 0.9 * len(diff), (len(rows), len(diff))
    for key, registers, stack in rows[["key", "candidate_registers", "candidate_stack"]].itertuples(
        index=False
    ):
        assert (int(registers), int(stack)) == dumped[key], key
