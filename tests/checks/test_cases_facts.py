"""A `tests` check's facts as their type: the recorded CUDA run's operator tests (an H200's,
written before the type existed) read as `CasesFacts` unchanged, a new judgement writes the
same type, and a count that is not a number is refused naming the file and the key."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from evidence_files import field_types, kind_listing, refusal

from qualify.checks.testsfacts import CaseCounts, CasesFacts
from qualify.records.result import CheckResult

ARCHIVE = (
    Path(__file__).resolve().parents[2] / "examples/llama-cpp-cuda/recorded/20261201-162842-cuda135.tar.xz"
)
MEMBER = "20261201-162842-cuda135/20-compile/operator-tests/result.json"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("operator-tests")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(where, members=[tar.getmember(MEMBER)], filter="data")
    return where / MEMBER


def test_the_recorded_counts_read_as_their_type(recorded: Path) -> None:
    result = CheckResult.load(recorded)
    assert result.evidence == CasesFacts(counts={r: CaseCounts(passed=9, failed=0, error=0, skipped=0)
                                                  for r in ("pinned", "candidate")})  # fmt: skip
    assert result.evidence.to_json() == {"version": 1, **json.loads(recorded.read_text())["facts"]}


def test_a_count_that_is_not_a_number_is_refused(recorded: Path, tmp_path: Path) -> None:
    saved = json.loads(recorded.read_text())
    saved["facts"]["counts"]["candidate"]["failed"] = "0"
    path = tmp_path / "result.json"
    said = refusal(path, saved)
    assert f"{path}: facts.counts.candidate.failed is a string, not a whole number" in said


def test_kinds_json_shows_the_counts() -> None:
    assert field_types(kind_listing("tests"))["counts{}.failed"] == "int"
