"""A `nix-build` check's evidence as types: every recorded build (the CUDA example's runs, its
bisection's steps and the ROCm example's run, written before the types existed, the oldest
before the nix options were recorded) reads whole as `BuildFacts`, `BuildMeasurement`,
`BuildSource`, `BuildPlan` and `InputsUsed` with nothing lost; the judge, re-deciding a recorded
build from its typed documents, writes what it recorded; and a document that does not hold is
refused naming the file and the key. Nothing stands in: the documents are the recorded runs' own."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from evidence_files import document, field_types, kind_listing, refusal, unpacked

from qualify.build.check import judge
from qualify.build.closure import CHANGE_ORDER
from qualify.checks.base import SavedCheck
from qualify.checks.evidence import Evidence
from qualify.core.checkspec import CheckSpec
from qualify.core.errors import RunStoreError
from qualify.core.runstore import write_json
from qualify.core.verdicts import Verdict
from qualify.records.build import (
    BuildFacts,
    BuildMeasurement,
    BuildPlan,
    ClosureDiff,
    InputsUsed,
    Problem,
    SourceProblem,
    read_source,
)
from qualify.records.result import CheckResult

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CUDA = EXAMPLES / "llama-cpp-cuda" / "recorded"
ROCM = max((EXAMPLES / "llama-cpp-rocm" / "recorded").glob("*-rocm72.tar.xz"))  # the latest run
#: Every recorded run with a build stage: a continued set's archive holds only the stages its
#: later lease ran (compile and bench), its build being in the first lease's archive.
ARCHIVES = [
    *sorted(a for a in CUDA.glob("2026*.tar.xz") if not a.name.endswith("-continued.tar.xz")),
    *sorted((CUDA / "bisect").glob("*.tar.xz")),
    ROCM,
]
RESULTS = ("result.json", "result.measured.json")
#: The build's own documents besides its result, each with the type that reads it.
READERS: dict[str, Callable[[Path], Evidence]] = {
    "measurement.json": BuildMeasurement.read,
    "source.json": read_source,
    "plan.json": BuildPlan.read,
    "inputs.json": InputsUsed.read,
}


def build_files(archive: Path, where: Path, suffixes: tuple[str, ...] = (".json",)) -> list[Path]:
    """The files of every build stage in a recorded run (or run set, or bisection)."""
    return unpacked(archive, where, lambda name: "/10-build/" in name and name.endswith(suffixes))


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_every_recorded_build_reads_whole(archive: Path, tmp_path: Path) -> None:
    paths = build_files(archive, tmp_path)
    results = [p for p in paths if p.name in RESULTS]
    assert results, archive
    for path in results:
        facts = CheckResult.load(path).evidence
        assert isinstance(facts, BuildFacts), path
        recorded = document(path)["facts"]
        assert facts.to_json() == {"version": 1, **recorded}, path
        assert facts.source.locked_url == recorded["source"]["locked_url"]
        for diff in ("runtime_diff", "build_diff"):
            typed = getattr(facts, diff)
            assert (typed is None) == (diff not in recorded), path
            assert typed is None or typed.changes() == {c: recorded[diff][c] for c in CHANGE_ORDER}
    read: Counter[str] = Counter()
    for path in paths:
        if path.name in READERS:
            saved = {k: v for k, v in document(path).items() if k != "schema_version"}
            assert READERS[path.name](path).to_json() == {"version": 1, **saved}, path
            read[path.name] += 1
    checks = sum(p.name == "result.json" for p in results)
    assert read["source.json"] == read["plan.json"] == checks, read
    assert read["measurement.json"] >= 2 * checks and read["inputs.json"] >= 2 * checks, read


@pytest.fixture(scope="module")
def rocm_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("rocm")
    build_files(ROCM, where, (".json", ".csv"))
    [folder] = where.glob("*/10-build/arms")
    return folder


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_the_judge_reads_each_recorded_build_and_writes_its_facts(archive: Path, tmp_path: Path) -> None:
    """From the recorded documents, read through their types: the recorded verdict, facts (now
    typed) and tables (arms, the dry run, toolchains, diffs, inputs; a record made before a table
    existed lacks it)."""
    results = [p for p in build_files(archive, tmp_path, (".json", ".csv")) if p.name == "result.json"]
    assert results, archive
    for path in results:
        recorded = document(path)
        spec = recorded["spec"]
        check = CheckSpec(spec["name"], spec["kind"], spec["params"], spec["limits"], tuple(spec["roles"]))
        judgement = judge(SavedCheck(path.parent, check, tuple(recorded["roles"])))
        assert isinstance(judgement.facts, BuildFacts), path
        assert judgement.facts == BuildFacts.load(recorded["facts"], path, "facts"), path
        assert (judgement.verdict.value, judgement.reason) == (recorded["verdict"], recorded["reason"])
        judged = {t.title: t.to_json() for t in judgement.tables}
        for table in recorded["tables"]:
            assert judged.get(table["title"]) == table, (path, table["title"])
        written = judgement.as_json()["facts"]
        assert BuildFacts.load(json.loads(json.dumps(written)), path, "facts") == judgement.facts


def test_a_source_that_could_not_be_resolved_reads_as_the_problem(tmp_path: Path) -> None:
    problem = SourceProblem(error=Problem(message="nix is not installed", hint="install nix"))
    write_json(tmp_path / "source.json", problem.to_json())
    assert read_source(tmp_path / "source.json") == problem
    check = CheckSpec("arms", "nix-build", {}, {}, ("pinned", "candidate"))
    judgement = judge(SavedCheck(tmp_path, check, check.roles))
    assert (judgement.verdict, judgement.reason) == (Verdict.ERROR, "nix is not installed (install nix)")


def test_the_diff_type_holds_every_change_the_closure_diff_counts() -> None:
    counts = dict.fromkeys([*CHANGE_ORDER, "left_paths", "right_paths"], 0)
    assert list(ClosureDiff.model_validate(counts).changes()) == list(CHANGE_ORDER)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda f: f["source"].update(dirty="no"), "facts.source.dirty is a string, not true or false"),
        (lambda f: f["build_diff"].pop("upgraded"), "facts.build_diff.upgraded is missing"),
        (lambda f: f.update(runtime_dif={}), "facts.runtime_dif: not a field this qualify knows"),
        (
            lambda f: f["runtime_diff"].update(added=1.5),
            "facts.runtime_diff.added is a number, not a whole number",
        ),
    ],
    ids=["wrong-type", "missing", "misspelt", "not-an-integer"],
)
def test_build_facts_that_do_not_hold_are_refused_naming_the_file_and_key(
    rocm_build: Path, tmp_path: Path, change: Any, said: str
) -> None:
    saved = document(rocm_build / "result.json")
    change(saved["facts"])
    path = tmp_path / "result.json"
    assert f"{path}: {said}" in refusal(path, saved)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda m: m.update(ok="true"), "ok is a string, not true or false"),
        (lambda m: m.pop("returncode"), "returncode is missing"),
        (lambda m: m.update(gc_root=m["gcroot"]), "gc_root: not a field this qualify knows"),
        (lambda m: m["outputs"].update(out=None), "outputs.out is null, not a string"),
    ],
    ids=["wrong-type", "missing", "misspelt", "not-a-path"],
)
def test_a_measurement_that_does_not_hold_names_the_file_and_key(
    rocm_build: Path, tmp_path: Path, change: Any, said: str
) -> None:
    edited = document(rocm_build / "candidate" / "measurement.json")
    change(edited)
    path = tmp_path / "measurement.json"
    path.write_text(json.dumps(edited))
    with pytest.raises(RunStoreError) as refused:
        BuildMeasurement.read(path)
    assert f"{path}: {said}" in refused.value.message, refused.value.message


def test_kinds_json_shows_the_build_facts_and_measurement() -> None:
    kind = kind_listing("nix-build")
    facts = field_types(kind)
    assert facts["source"] == "SourceFacts" and facts["source.revision"] == "str | None"
    assert facts["build_diff"] == "ClosureDiff | None" and facts["runtime_diff.left_paths"] == "int"
    assert {f"build_diff.{c}" for c in CHANGE_ORDER} <= set(facts)
    measured = field_types(kind, "measurement")
    assert measured["built[].seconds"] == "float | None" and measured["failed[].tail"] == "list[str]"
    assert kind["facts"]["version"] == BuildFacts.VERSION
    assert kind["measurement"]["version"] == BuildMeasurement.VERSION
