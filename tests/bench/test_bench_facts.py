"""A bench check's facts as their type: every recorded run's bench (an H200's, written before
the type existed, in the layouts of four days: without the machine's state, then with it)
reads as `BenchFacts` with nothing lost, and a fact that does not hold is refused naming the
file and the key. Nothing stands in: the documents are the recorded runs' own."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from evidence_files import field_types, kind_listing, refusal

from qualify.records.bench import BenchFacts
from qualify.records.result import CheckResult

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _with_bench(archive: Path) -> bool:
    with tarfile.open(archive) as tar:
        return any(name.endswith("60-bench/llama-bench/result.json") for name in tar.getnames())


#: The CUDA example's recorded runs that reached the bench (the ROCm one's bench never ran: no
#: AMD GPU measured it; the set of 2026-12-07 ended before its bench).
ARCHIVES = [
    a for a in sorted((EXAMPLES / "llama-cpp-cuda" / "recorded").glob("2026*.tar.xz")) if _with_bench(a)
]


def bench_results(archive: Path, where: Path) -> list[Path]:
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.endswith("60-bench/llama-bench/result.json")]
        tar.extractall(where, members=members, filter="data")
    return [where / m.name for m in members]


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_every_recorded_bench_reads_whole(archive: Path, tmp_path: Path) -> None:
    paths = bench_results(archive, tmp_path)
    assert paths, archive
    for path in paths:
        result = CheckResult.load(path)
        facts = result.evidence
        assert isinstance(facts, BenchFacts), path
        recorded = json.loads(path.read_text())["facts"]
        assert facts.to_json() == {"version": 1, **recorded}, path
        assert set(facts.tests) == set(recorded["tests"]) and facts.pairs == recorded["pairs"]
        for name, test in facts.tests.items():
            assert test.finding == recorded["tests"][name]["finding"]


def test_a_bench_fact_that_does_not_hold_names_the_file_and_key(tmp_path: Path) -> None:
    [path, *_] = bench_results(ARCHIVES[0], tmp_path)
    saved = json.loads(path.read_text())
    test = next(iter(saved["facts"]["tests"]))
    saved["facts"]["tests"][test]["ratio"] = "1.02"
    assert f"facts.tests.{test}.ratio is a string, not a number" in refusal(path, saved)


def test_kinds_json_shows_the_bench_facts() -> None:
    kind = kind_listing("bench")
    fields = field_types(kind)
    assert fields["tests"] == "dict[str, BenchTestFact]"
    assert fields["tests{}.high"] == "float | None" and fields["plan.looks"] == "list[int]"
    assert kind["measurement"] is not None  # typed: `qualify.records.bench`
