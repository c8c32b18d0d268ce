"""The `openai-suite` kind's evidence as types: every recorded run's serving check (an H200's
runs of one and a run set's members, written before the types existed; the ROCm run's, skipped
on a host without its GPU) reads as `ServingFacts`, each role's measurement.json and cases.json
and the check's timing.json as theirs, all with nothing lost; the judge decides the recorded
checks from the typed documents exactly as they were decided; and a document that does not hold
is refused naming the file and the key. Nothing stands in: the documents are the recorded runs'
own."""

from __future__ import annotations

import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from evidence_files import field_types, kind_listing, refusal

from qualify.checks.base import SavedCheck
from qualify.core.checkspec import CheckSpec
from qualify.core.errors import RunStoreError
from qualify.kinds import install
from qualify.records.result import CheckResult
from qualify.records.serving import ServingCases, ServingFacts, ServingMeasurement, ServingTiming
from qualify.serving.check import judge

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARCHIVES = sorted((EXAMPLES / "llama-cpp-cuda" / "recorded").glob("2026*.tar.xz")) + sorted(
    (EXAMPLES / "llama-cpp-rocm" / "recorded").glob("*.tar.xz")
)


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Every recorded serving check's folder (`*/40-serving/CHECK/`), unpacked."""
    install()
    where = tmp_path_factory.mktemp("recorded")
    folders: list[Path] = []
    for archive in ARCHIVES:
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if "/40-serving/" in m.name]
            tar.extractall(where, members=members, filter="data")
        folders += [where / m.name for m in members if m.name.endswith("/result.json")]
    return [path.parent for path in sorted(folders)]


def document(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def recorded(path: Path) -> dict[str, Any]:
    """A document as qualify wrote it, less the file's own version stamp."""
    return {k: v for k, v in document(path).items() if k != "schema_version"}


def measured(checks: list[Path]) -> list[Path]:
    """The recorded checks that were measured (a SKIPPED one has no facts)."""
    return [c for c in checks if document(c / "result.json")["facts"]]


def test_every_recorded_serving_result_reads_whole(checks: list[Path]) -> None:
    assert {c.name for c in checks} == {"llama-server"} and measured(checks), checks
    for check in checks:
        for path in sorted(check.glob("result*.json")):  # result.measured.json: before a rejudge
            facts = CheckResult.load(path).evidence
            saved = document(path)["facts"]
            if not saved:
                assert facts is None, path  # never measured: no judge wrote facts
                continue
            assert isinstance(facts, ServingFacts), path
            assert facts.to_json() == {"version": 1, **saved}, path
            assert facts.cases == saved["cases"] and [g.case for g in facts.greedy] == [
                g["case"] for g in saved["greedy"]
            ]
            assert facts.timing is not None and len(facts.timing.rows) == len(saved["timing"]["rows"])


def test_every_recorded_role_and_timing_document_reads_whole(checks: list[Path]) -> None:
    for check in measured(checks):
        facts = document(check / "result.json")["facts"]
        for role, count in facts["cases"].items():
            m = ServingMeasurement.read(check / role / "measurement.json")
            assert m.to_json() == {"version": 1, **recorded(check / role / "measurement.json")}
            assert m.role == role and m.server is not None and m.ran + m.not_run == m.suites
            cases = ServingCases.read(check / role / "cases.json")
            assert cases.to_json() == {"version": 1, **recorded(check / role / "cases.json")}
            assert len(cases.cases) == count
            greedy = {c.case: c.greedy for c in cases.cases if c.greedy is not None}
            assert {g["case"] for g in facts["greedy"]} <= set(greedy)
            assert all(len(g.tokens) == len(g.margins) for g in greedy.values())
        timing = ServingTiming.read(check / "timing.json")
        assert timing.to_json() == {"version": 1, **recorded(check / "timing.json")}
        assert timing.pairs == facts["timing"]["pairs"]
        # A round sends one request per role and request type, pinned's and the candidate's.
        assert len(timing.records) == 2 * timing.pairs * len(timing.types)
        assert {r.role for r in timing.records} == {"pinned", "candidate"}


def spec_of(check: Path) -> CheckSpec:
    """The check as its result.json recorded it."""
    s = document(check / "result.json")["spec"]
    return CheckSpec(s["name"], s["kind"], s["params"], s["limits"], tuple(s["roles"]))


def test_the_judge_decides_the_recorded_checks_as_they_were_decided(checks: list[Path]) -> None:
    """From the typed documents, the judge writes typed facts and decides as it did then: the
    same verdict, reason, findings, tables and (with their version) facts."""
    for check in measured(checks):
        judgement = judge(SavedCheck(check, spec_of(check), spec_of(check).roles))
        assert isinstance(judgement.facts, ServingFacts)
        written = json.loads(json.dumps(judgement.as_json()))
        saved = document(check / "result.json")
        for key in ("verdict", "reason", "judged", "findings", "tables"):
            assert written[key] == saved[key], (check, key)
        assert written["facts"] == {"version": 1, **saved["facts"]}
        assert ServingFacts.load(written["facts"], "result.json", "facts") == judgement.facts


def test_facts_without_timing_leave_it_out(checks: list[Path], tmp_path: Path) -> None:
    check = shutil.copytree(measured(checks)[0], tmp_path / "llama-server")
    (check / "timing.json").unlink()
    judgement = judge(SavedCheck(check, spec_of(check), spec_of(check).roles))
    assert isinstance(judgement.facts, ServingFacts) and judgement.facts.timing is None
    written = judgement.as_json()["facts"]
    assert "timing" not in written and written["cases"] == document(check / "result.json")["facts"]["cases"]
    assert "timing gate not run (a server was not up for it)" in [f.message for f in judgement.findings]


def edited(checks: list[Path], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    saved = document(measured(checks)[0] / "result.json")
    change(saved["facts"])
    return saved


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda f: f["timing"]["rows"][0].update(p_value="0.99"),
            "facts.timing.rows[0].p_value is a string, not a number",
        ),
        (lambda f: f["greedy"][0].pop("tie"), "facts.greedy[0].tie is missing"),
        (lambda f: f.update(greedyy=f["greedy"]), "facts.greedyy: not a field this qualify knows"),
        (lambda f: f["cases"].update(pinned="26"), "facts.cases.pinned is a string, not a whole number"),
        (
            lambda f: f["timing"]["rows"][0].update(result="OK"),
            "facts.timing.rows[0].result 'OK' is not one of",
        ),
    ],
    ids=["wrong-type", "missing", "misspelt", "count-as-text", "unknown-result"],
)
def test_a_result_whose_facts_do_not_hold_is_refused(
    checks: list[Path], tmp_path: Path, change: Callable[[dict[str, Any]], Any], said: str
) -> None:
    path = tmp_path / "result.json"
    message = refusal(path, edited(checks, change))
    assert message.startswith(f"{path}: ") and said in message, message


@pytest.mark.parametrize(
    ("name", "change", "said"),
    [
        (
            "candidate/cases.json",
            lambda d: d["cases"][0].update(problems="none"),
            "cases[0].problems is a string, not a list",
        ),
        ("candidate/cases.json", lambda d: d["cases"][3].pop("greedy_ref"), "cases[3].greedy_ref is missing"),
        ("pinned/measurement.json", lambda d: d.update(ran="readiness"), "ran is a string, not a list"),
        ("pinned/measurement.json", lambda d: d.update(dead=None), "dead: not a field this qualify knows"),
        (
            "timing.json",
            lambda d: d["records"][5].update(ok="true"),
            "records[5].ok is a string, not true or false",
        ),
    ],
    ids=["cases-wrong-type", "cases-missing", "measurement-wrong-type", "measurement-misspelt", "timing"],
)
def test_the_judge_refuses_a_saved_document_that_does_not_hold(
    checks: list[Path], tmp_path: Path, name: str, change: Callable[[dict[str, Any]], Any], said: str
) -> None:
    check = shutil.copytree(measured(checks)[0], tmp_path / "llama-server")
    saved = document(check / name)
    change(saved)
    (check / name).write_text(json.dumps(saved))
    with pytest.raises(RunStoreError) as refused:
        judge(SavedCheck(check, spec_of(check), spec_of(check).roles))
    message = refused.value.message
    assert message.startswith(f"{check / name}: ") and said in message, message


def test_kinds_json_shows_what_the_serving_evidence_holds() -> None:
    kind = kind_listing("openai-suite")
    facts = field_types(kind)
    assert facts["cases"] == "dict[str, int]" and facts["greedy"] == "list[GreedyFact]"
    assert facts["greedy[].margin"] == "float | None" and facts["timing"] == "TimingFacts | None"
    assert facts["timing.rows[].p_value"] == "float | None" and facts["timing.rows[].exceeded"] == "bool"
    measurement = field_types(kind, "measurement")
    assert measurement["server.argv"] == "list[str]" and measurement["died.log_tail"] == "list[str]"
    assert kind["measurement"]["version"] == ServingMeasurement.VERSION
    assert kind["facts"]["version"] == ServingFacts.VERSION
