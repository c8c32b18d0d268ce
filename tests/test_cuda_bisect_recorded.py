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

import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from recorded_runs import Rejudge, unpack

from qualify.bisect.answers import Answer
from qualify.bisect.drive import drive
from qualify.bisect.gate import Gate, judge_step
from qualify.bisect.outcomes import Measured
from qualify.bisect.report import answer_document, markdown
from qualify.bisect.resume import open_state
from qualify.bisect.search import bisect_next, series_next
from qualify.bisect.state import Step
from qualify.core.symbols import display_name
from qualify.records.bisect import Finding, Mode, Outcome

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "llama-cpp-cuda"
PROJECT = EXAMPLE / "bisect"
RECORDED = EXAMPLE / "recorded" / "bisect"
GATE = Gate("compile", "20-compile", "kernel-resources")
#: What the README says the bisect found.
LAST_GOOD, FIRST_BAD = "nvcc-13.1.115", "nvcc-13.2.51"


#: The search, and the same series with every step measured (`--series-mode`).
ARCHIVES = {
    "bisect": RECORDED / "20261205-111849-bisect-nvcc.tar.xz",
    "series": RECORDED / "20261205-112904-bisect-nvcc.tar.xz",
}
#: The series' per-step counts (kernels spilling more, losing occupancy, failing), 13.0.88 first.
SERIES = (
    (0, 0, 0),
    (0, 0, 0),
    (0, 0, 0),
    (1, 0, 1),
    (1, 0, 1),
    (1, 0, 1),
    (1, 8, 9),
    (1, 8, 9),
    (1, 13, 14),
    (1, 13, 14),
    (16, 20, 36),
)
#: The release at which each kernel failing at 13.5.37 first fails, by family (README).
FIRST_FAILS = {
    ("nvcc-13.2.51", "mul_mat_q"): 1,
    ("nvcc-13.3.33", "mul_mat_f"): 8,
    ("nvcc-13.4.59", "flash_attn_ext_vec"): 4,
    ("nvcc-13.4.59", "pool2d_nchw_kernel"): 1,
    ("nvcc-13.5.37", "flash_attn_ext_f16"): 15,
    ("nvcc-13.5.37", "lightning_indexer_kernel_wmma"): 7,
}


@pytest.fixture(scope="module")
def rejudged(rejudge_recorded: Rejudge, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Each archive unpacked, and every step's run in it re-judged, once for the module: the
    series is read by the search's test and by the chart's."""
    done: dict[str, Path] = {}

    def folder(name: str) -> Path:
        if name not in done:
            done[name] = unpack(ARCHIVES[name], tmp_path_factory.mktemp(name))
            for run in runs(done[name]):
                rejudge_recorded(PROJECT, run)
        return done[name]

    return folder


@pytest.fixture(scope="module", params=sorted(ARCHIVES))
def recorded(request: pytest.FixtureRequest, rejudged: Callable[[str], Path]) -> Path:
    folder = rejudged(request.param)
    assert state(folder)["mode"] == request.param
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
        assert measured.evidence is not None
        assert measured.evidence.saved()["figure"] == probe["evidence"]["figure"], probe["step"]
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


@pytest.mark.parametrize("name", sorted(ARCHIVES))
def test_the_recorded_state_reads_resumes_and_renders_as_recorded(name: str, tmp_path: Path) -> None:
    """bisect.json as the older qualify wrote it reads through its type, resumes to its answer
    without probing a step again, and gives back the same answer, rows and bisect.md table."""
    folder = unpack(ARCHIVES[name], tmp_path)
    saved = state(folder)
    resumed = open_state(
        folder / "bisect.json",
        saved["series"],
        mode=Mode(name),
        retries=saved["retries"],
        context=saved["context"],
    )

    def probe(step: Step) -> Measured:
        raise AssertionError(f"step {step.name} probed again")

    answer = drive(resumed, probe)
    document = answer_document(answer, resumed)
    for key in ("mode", "series", "retries", "context", "probes", "answer", "steps"):
        assert document[key] == saved[key], key
    # The kernels changed are read from the steps' folders where they were recorded, and the
    # qualify that recorded it printed reasons unescaped: the text is as it was.
    recorded = (folder / "bisect.md").read_text().partition("\n## Kernels changed")[0]
    shown = markdown(answer, resumed).partition("\n## Kernels changed")[0]
    assert html.unescape(re.sub(r"\\(.)", r"\1", shown)).replace("\u200b", "") == recorded
    assert json.loads((folder / "bisect.json").read_text()) == saved, "a resume leaves the file as it was"


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
    folder = unpack(ARCHIVES["bisect"], tmp_path)
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


@pytest.fixture(scope="module")
def series(rejudged: Callable[[str], Path]) -> Path:
    return rejudged("series")


def test_every_release_measured_gives_the_series_chart(series: Path) -> None:
    """Series mode probed every release once; each step's counts, read as the bisect reads them
    from its re-judged run, are the README's series."""
    saved = state(series)
    assert [p["step"] for p in saved["probes"]] == saved["series"]
    counts = []
    for probe in saved["probes"]:
        evidence = judge_step(run_of(series, probe), GATE).evidence
        assert evidence is not None
        figure = evidence.saved()["figure"]
        counts.append(
            tuple(figure[k] for k in ("kernels spilling", "kernels losing occupancy", "kernels failing"))
        )
    assert tuple(counts) == SERIES


def test_each_failing_kernel_first_fails_at_its_release(series: Path) -> None:
    """For every kernel that fails at 13.5.37, the first release at which its comparison with
    13.0.88 fails, counted by family: the releases the README names."""
    saved = state(series)
    first: dict[str, str] = {}
    for probe in saved["probes"]:
        diff = pd.read_parquet(run_of(series, probe) / GATE.folder / str(GATE.check) / "diff.parquet")
        for key in diff.loc[diff["severity"] == "FAIL", "key"]:
            first.setdefault(str(key), probe["step"])
    counts: dict[tuple[str, str], int] = {}
    for key, step in first.items():
        family = display_name(key).split("<")[0]
        counts[(step, family)] = counts.get((step, family), 0) + 1
    assert counts == FIRST_FAILS
    readme = (EXAMPLE / "README.md").read_text()
    for step, family in FIRST_FAILS:
        assert f"`{family}`" in readme and step.removeprefix("nvcc-") in readme
