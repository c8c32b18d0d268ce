"""A `kld` check's facts and the stage's record as their types: every recorded run's numerics
(the CUDA example's on an H200, the ROCm example's, written before the types existed, with the
first layout of the non-inferiority test) read as `KldFacts` and `NumericsRecord` with nothing
lost, and a fact that does not hold is refused naming the file and the key. Nothing stands in:
the documents are the recorded runs' own."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from evidence_files import field_types, kind_listing, refusal

from qualify.core.errors import RunStoreError
from qualify.numerics.limitmetrics import judged_metric
from qualify.records.numerics import KldFacts, NumericsRecord
from qualify.records.result import CheckResult

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARCHIVES = sorted(
    [
        *(EXAMPLES / "llama-cpp-cuda" / "recorded").glob("2026*.tar.xz"),
        *(EXAMPLES / "llama-cpp-rocm" / "recorded").glob("2026*.tar.xz"),
    ]
)


def numerics_files(archive: Path, where: Path, name: str) -> list[Path]:
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if "/30-numerics/" in m.name and m.name.endswith(f"/{name}")]
        tar.extractall(where, members=members, filter="data")
    return [where / m.name for m in members]


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_every_recorded_kld_result_reads_whole(archive: Path, tmp_path: Path) -> None:
    for path in numerics_files(archive, tmp_path, "result.json"):
        recorded = json.loads(path.read_text())
        result = CheckResult.load(path)
        if not recorded.get("facts"):
            assert result.evidence is None  # never judged: nothing to type
            continue
        facts = result.evidence
        assert isinstance(facts, KldFacts), path
        assert facts.to_json() == {"version": 1, **recorded["facts"]}, path
        candidate = recorded["facts"]["summaries"]["reference|candidate"]
        summary = facts.summary("candidate")
        assert summary is not None and summary.kld_mean == candidate["kld_mean"]
        ni = facts.noninferiority
        assert ni is not None and ni.verdict == recorded["facts"]["noninferiority"]["verdict"]
        # The bisect's reading of the same facts: the verdict the judge saved.
        said = judged_metric("noninferiority", facts, recorded["spec"]["limits"])
        assert said is not None and said.verdict == ni.verdict and said.candidate == ni.mean_kl_candidate


def test_the_recorded_runs_hold_judged_numerics(tmp_path: Path) -> None:
    """The tests above read real documents: three recorded CUDA runs scored numerics (the
    others did not reach it, or had no GPU to score it on): eight records (a set's own and its
    members') and five judged results among them."""
    found = {
        name: [p for a in ARCHIVES for p in numerics_files(a, tmp_path / a.name, name)]
        for name in ("result.json", "numerics.json")
    }
    judged = [p for p in found["result.json"] if json.loads(p.read_text()).get("facts")]
    assert len(judged) >= 5 and len(found["numerics.json"]) >= 8


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_every_recorded_numerics_record_reads_whole(archive: Path, tmp_path: Path) -> None:
    for path in numerics_files(archive, tmp_path, "numerics.json"):
        recorded = json.loads(path.read_text())
        record = NumericsRecord.read(path)
        recorded.pop("schema_version")
        assert record.to_json() == {"version": 1, **recorded}, path
        assert [p.roles for p in record.passes] == [p["roles"] for p in recorded["passes"]]


def test_a_kld_fact_that_does_not_hold_names_the_file_and_key(tmp_path: Path) -> None:
    path = next(p for p in numerics_files(ARCHIVES[0], tmp_path, "result.json") if "facts" in p.read_text())
    original = path.read_text()
    saved = json.loads(original)
    saved["facts"]["summaries"]["reference|candidate"]["same_top_p"] = "0.95"
    said = refusal(path, saved)
    assert "facts.summaries.reference|candidate.same_top_p is a string, not a number" in said
    saved = json.loads(original)
    del saved["facts"]["noninferiority"]["theta"]
    assert "facts.noninferiority.theta is missing" in refusal(path, saved)
    saved = json.loads(original)
    saved["facts"]["n_chunk"] = 32  # misspelt
    assert "facts.n_chunk: not a field this qualify knows" in refusal(path, saved)


def test_a_record_that_does_not_hold_names_the_file_and_key(tmp_path: Path) -> None:
    [path, *_] = numerics_files(ARCHIVES[0], tmp_path, "numerics.json")
    saved = json.loads(path.read_text())
    saved["passes"][0]["tokens"] = 20.5
    path.write_text(json.dumps(saved))
    with pytest.raises(
        RunStoreError, match=r"numerics.json: passes\[0\]\.tokens is a number, not a whole number"
    ):
        NumericsRecord.read(path)


def test_kinds_json_shows_the_kld_facts() -> None:
    fields = field_types(kind_listing("kld"))
    assert fields["summaries"] == "dict[str, PairSummary] | None"
    assert fields["summaries{}.same_top_p"] == "float"
    assert fields["bounds{}{}.bound"] == "float"
    assert fields["noninferiority.tests[].upper"] == "float"
    assert fields["looks.planned"] == "list[int]"
