"""What a bench check saves and reads back, as types: every recorded run's bench documents (the
roles' measurement.json, schedule.json and its units, units.jsonl's lines: the run of each day,
the pin study's and the noise study's, all written before the types existed) read as
`BenchMeasurement`, `BenchSchedule` and `BenchUnit` with nothing lost, and a document that does
not hold is refused naming the file and the key. Nothing stands in: the documents are the
recorded runs' own."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
from evidence_files import field_types, kind_listing

from qualify.checks.evidence import Evidence
from qualify.core.errors import RunStoreError
from qualify.records.bench import BenchMeasurement, BenchSchedule, BenchUnit

RECORDED = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp-cuda" / "recorded"
#: The runs of each day; the studies' archives (noise-study-20261203, pin-study-20261202) hold
#: their units' output and tables, not a bench's documents (`test_the_studies_hold_no_documents`).


def _with_bench(archive: Path) -> bool:
    with tarfile.open(archive) as tar:
        return any("/60-bench/" in name for name in tar.getnames())


#: The runs of each day that reached the bench (the set of 2026-12-07 ended before it).
ARCHIVES = [a for a in sorted(RECORDED.glob("2026*.tar.xz")) if _with_bench(a)]
STUDIES = sorted(
    [
        *(RECORDED / "noise-study-20261203").glob("*.tar.xz"),
        *(RECORDED / "pin-study-20261202").glob("*.tar.xz"),
    ]
)
TYPES: dict[str, type[Evidence]] = {"measurement.json": BenchMeasurement, "schedule.json": BenchSchedule}


def bench_documents(archive: Path, where: Path) -> list[Path]:
    """The archive's bench documents qualify wrote (measurements, schedules, units.jsonl)."""
    with tarfile.open(archive) as tar:
        members = [
            m
            for m in tar.getmembers()
            if "/60-bench/" in m.name and m.name.rsplit("/", 1)[-1] in (*TYPES, "units.jsonl")
        ]
        tar.extractall(where, members=members, filter="data")
    return [where / m.name for m in members]


def recorded(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    document.pop("schema_version", None)
    assert isinstance(document, dict)
    return document


@pytest.mark.parametrize("archive", ARCHIVES, ids=lambda a: a.name.removesuffix(".tar.xz"))
def test_every_recorded_bench_document_reads_whole(archive: Path, tmp_path: Path) -> None:
    paths = bench_documents(archive, tmp_path)
    assert {p.name for p in paths} >= set(TYPES), archive
    for path in paths:
        if path.name == "units.jsonl":
            for line in path.read_text().splitlines():
                assert BenchUnit.model_validate(json.loads(line)).to_json() == json.loads(line), path
            continue
        typed = TYPES[path.name].read(path)
        assert typed.to_json() == {"version": 1, **recorded(path)}, path
        if isinstance(typed, BenchSchedule):
            assert len(typed.units) == len(recorded(path)["units"]) and typed.pairs == recorded(path)["pairs"]
        if isinstance(typed, BenchMeasurement):
            assert set(typed.configs) == set(recorded(path)["configs"])


def test_the_studies_hold_no_documents(tmp_path: Path) -> None:
    assert STUDIES
    for archive in STUDIES:
        assert bench_documents(archive, tmp_path) == [], archive


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One recorded schedule and measurement with all that a schedule records (the newest run's)."""
    paths = bench_documents(ARCHIVES[3], tmp_path_factory.mktemp("bench"))
    found = {p.name: p for p in paths if p.name in TYPES}
    assert "gpu_telemetry" in recorded(found["schedule.json"])
    return found


def refused(path: Path, document: dict[str, Any], kind: type[Evidence]) -> str:
    path.write_text(json.dumps({"schema_version": 1, **document}))
    with pytest.raises(RunStoreError) as refusal:
        kind.read(path)
    return refusal.value.message


def first_pair(schedule: dict[str, Any]) -> int:
    return next(i for i, u in enumerate(schedule["units"]) if u["phase"] == "pair")


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda s, i: s.update(pairs="12"), "pairs is a string, not a whole number"),
        (lambda s, i: s.pop("stop_reason"), "stop_reason is missing"),
        (lambda s, i: s.update(stop_reasons="done"), "stop_reasons: not a field this qualify knows"),
        (lambda s, i: s["units"][i].update(ok="yes"), "units[{i}].ok is a string, not true or false"),
        (lambda s, i: s["units"][i].pop("role"), "units[{i}].role is missing"),
        (
            lambda s, i: s["units"][i]["host"].update(foreign_cores="0.3"),
            "units[{i}].host.foreign_cores is a string, not a number",
        ),
        (
            lambda s, i: s["units"][i]["gpu"]["gpus"]["0"].update(reason={}),
            "units[{i}].gpu.gpus.0.reason: not a",
        ),
        (lambda s, i: s["plan"].update(looks=[10, "20"]), "plan.looks[1] is a string, not a whole number"),
        (
            lambda s, i: s["baseline_env"].update(load=None, gpu_processes="none"),
            "baseline_env.gpu_processes is a string, not a list",
        ),
    ],
)
def test_a_schedule_that_does_not_hold_names_the_file_and_key(
    documents: dict[str, Path], tmp_path: Path, edit: Any, said: str
) -> None:
    schedule = recorded(documents["schedule.json"])
    index = first_pair(schedule)
    edit(schedule, index)
    path = tmp_path / "schedule.json"
    message = refused(path, schedule, BenchSchedule)
    assert message.startswith(f"{path}: ") and said.format(i=index) in message, message


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda m: m.update(arm=3), "arm is a number, not a string"),
        (lambda m: m.pop("configs"), "configs is missing"),
        (lambda m: m.update(engin={}), "engin: not a field this qualify knows"),
        (lambda m: m.update(version=2), "is version 2; this qualify reads BenchMeasurement up to version 1"),
    ],
)
def test_a_measurement_that_does_not_hold_names_the_file_and_key(
    documents: dict[str, Path], tmp_path: Path, edit: Any, said: str
) -> None:
    measurement = recorded(documents["measurement.json"])
    edit(measurement)
    path = tmp_path / "measurement.json"
    message = refused(path, measurement, BenchMeasurement)
    assert message.startswith(f"{path}: ") and said in message, message


def test_kinds_json_shows_the_bench_measurement() -> None:
    fields = field_types(kind_listing("bench"), "measurement")
    assert fields["arm"] == "str" and fields["configs"] == "dict[str, dict[str, Any]]"
    assert fields["measured_as"] == "str | None"
