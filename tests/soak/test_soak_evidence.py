"""The soak's evidence as types: the recorded CUDA run's soak (an H200's measurements, written
before the types existed) reads as `SoakMeasurement` and `SoakFacts` with nothing lost, its
re-judgement writes the same facts, and a document that does not hold is refused naming the
file and the key. Nothing stands in: the documents are the recorded run's own."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
from evidence_files import field_types, kind_listing, refusal
from recorded_runs import unpack

from qualify.checks import registry
from qualify.checks.base import SavedCheck
from qualify.checks.evidence import Migration
from qualify.core.errors import RunStoreError
from qualify.kinds import install
from qualify.pipeline.plan import load_plan
from qualify.records.result import CheckResult
from qualify.records.soak import SoakFacts, SoakMeasurement
from qualify.soak.check import judge

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp-cuda"
ARCHIVE = EXAMPLE / "recorded" / "20261201-162842-cuda135.tar.xz"


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> Path:
    install()
    return unpack(ARCHIVE, tmp_path_factory.mktemp("recorded")) / "50-soak" / "llama-server-soak"


def document(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


@pytest.mark.parametrize("role", ["pinned", "candidate"])
def test_a_recorded_measurement_reads_whole(soak: Path, role: str) -> None:
    path = soak / role / "measurement.json"
    m = SoakMeasurement.read(path)
    assert m.server is not None and m.server.slots == 4 and m.schedule == "interleaved"
    assert [b.block for b in m.blocks] == [0, 1] and m.compaction and len(m.compaction.events) == 4
    # Nothing lost or changed: the typed document is the recorded one, with its version.
    recorded = {k: v for k, v in document(path).items() if k != "schema_version"}
    assert m.to_json() == {"version": 1, **recorded}


def test_the_recorded_facts_read_as_the_kinds_type(soak: Path) -> None:
    result = CheckResult.load(soak / "result.json")
    assert isinstance(result.evidence, SoakFacts)
    facts = result.evidence
    assert facts.requests["candidate"].sent == 301 and facts.requests["pinned"].ok == 301
    assert facts.horizon_s == 65.0 and not facts.a_a
    assert {t.series for t in facts.trends} >= {"anon_mib"}
    assert facts.to_json() == {"version": 1, **document(soak / "result.json")["facts"]}


def test_the_judge_reads_the_recorded_measurements_and_writes_typed_facts(soak: Path) -> None:
    """The judge reads the typed measurements and writes typed facts: from the recorded data
    with the example's plan (the profile it ran), the recorded verdict and request figures. (The
    trend bounds differ from the recording's: the trend tests have been sharpened since.)"""
    plan = load_plan(EXAMPLE / "stages", profile="quick")
    [spec] = [c for c in plan.stage("soak").checks if c.name == "llama-server-soak"]
    judgement = judge(SavedCheck(soak, spec, ("pinned", "candidate")))
    assert isinstance(judgement.facts, SoakFacts)
    recorded = SoakFacts.load(document(soak / "result.json")["facts"], soak / "result.json", "facts")
    assert judgement.verdict.value == document(soak / "result.json")["verdict"]
    assert judgement.facts.requests == recorded.requests and judgement.facts.horizon_s == recorded.horizon_s
    assert [(t.series, t.role, t.finding) for t in judgement.facts.trends] == [
        (t.series, t.role, t.finding) for t in recorded.trends
    ]
    written = judgement.as_json()["facts"]
    assert SoakFacts.load(json.loads(json.dumps(written)), "result.json", "facts") == judgement.facts


def broken(soak: Path, tmp_path: Path, change: Any) -> Path:
    path = tmp_path / "measurement.json"
    edited = copy.deepcopy(document(soak / "candidate" / "measurement.json"))
    change(edited)
    path.write_text(json.dumps(edited))
    return path


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d["server"].update(argv="llama-server"), "server.argv is a string, not a list"),
        (lambda d: d["blocks"][1].pop("requests"), "blocks[1].requests is missing"),
        (lambda d: d.update(serverr={}), "serverr: not a field this qualify knows"),
        (
            lambda d: d["compaction"].update(permitted="yes"),
            "compaction.permitted is a string, not true or false",
        ),
    ],
    ids=["wrong-type", "missing", "misspelt", "not-a-boolean"],
)
def test_a_measurement_that_does_not_hold_names_the_file_and_key(
    soak: Path, tmp_path: Path, change: Any, said: str
) -> None:
    path = broken(soak, tmp_path, change)
    with pytest.raises(RunStoreError) as refused:
        SoakMeasurement.read(path)
    assert str(path) in refused.value.message and said in refused.value.message, refused.value.message


def test_a_newer_version_is_refused_and_an_older_one_migrated(soak: Path, tmp_path: Path) -> None:
    path = broken(soak, tmp_path, lambda d: d.update(version=SoakMeasurement.VERSION + 1))
    with pytest.raises(RunStoreError, match="this qualify reads SoakMeasurement up to version 1"):
        SoakMeasurement.read(path)

    class Renamed(SoakMeasurement):
        """A later layout that renamed `telemetry_samples`: version 1 is migrated to it."""

        VERSION = 2
        MIGRATIONS: ClassVar[Mapping[int, Migration]] = {
            1: lambda d: {**d, "samples": d.pop("telemetry_samples")}
        }
        telemetry_samples: int | None = None
        samples: int

    old = SoakMeasurement.read(soak / "candidate" / "measurement.json")
    assert Renamed.read(soak / "candidate" / "measurement.json").samples == old.telemetry_samples == 80


def test_a_result_whose_facts_do_not_hold_is_refused(soak: Path, tmp_path: Path) -> None:
    saved = document(soak / "result.json")
    saved["facts"]["requests"]["candidate"]["sent"] = "many"
    path = tmp_path / "result.json"
    assert f"{path}: facts.requests.candidate.sent" in refusal(path, saved)


def test_kinds_json_shows_what_the_facts_hold() -> None:
    kind = kind_listing("soak")
    names = field_types(kind)
    assert names["requests"] == "dict[str, RequestSummary]"
    assert names["requests{}.ttft_p50_s"] == "float | None"
    assert names["trends[].growth_high"] == "float | None"
    assert kind["measurement"]["version"] == SoakMeasurement.VERSION
    assert "server.pids" in field_types(kind, "measurement")
    assert registry.evidence_types("soak") is not None and registry.evidence_types("no-such-kind") is None
