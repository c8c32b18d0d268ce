"""The run folder's records as one owned schema: versions, the migration of an older layout,
saving through the types, and refusing what does not hold.

The older layout is a real one: the CUDA example's recorded run (examples/llama-cpp-cuda/
recorded/) was written at version 1, before run.json recorded nix options, every candidate
given and the controls asked for. It is read here as it is, and copied before anything writes.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Project, command_stage
from recorded_runs import Rejudge, unpack
from typer.testing import CliRunner

from qualify.cli import app
from qualify.core.errors import RunStoreError
from qualify.core.runstore import RunDir
from qualify.records.result import CheckResult
from qualify.records.run import RunRecord
from qualify.records.stage import StageRecord

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama-cpp-cuda"
ARCHIVE = EXAMPLE / "recorded" / "20261201-162842-cuda135.tar.xz"


def current() -> int:
    """The records' version now (imported here, so that a qualify without it fails the test
    that needs it, not the module)."""
    from qualify.core.runstore import RECORD_VERSION

    return RECORD_VERSION


def raw(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def write(path: Path, document: dict[str, Any]) -> None:
    path.write_text(json.dumps(document, indent=2))


def fingerprint(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def stage_files(run: Path) -> list[Path]:
    return sorted(run.glob("*/stage.json"))


def result_files(run: Path) -> list[Path]:
    return sorted(run.glob("*/*/result.json"))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded quick run, unpacked once from its archive; tests that write take a copy."""
    return unpack(ARCHIVE, tmp_path_factory.mktemp("recorded"))


@pytest.fixture
def copy(tmp_path: Path, recorded: Path) -> Path:
    """The recorded run, copied where a test may write."""
    target = tmp_path / recorded.name
    shutil.copytree(recorded, target)
    return target


# (a) the recorded run reads through the records, and a record's JSON reads back as it.


def test_the_recorded_run_loads_and_round_trips_without_being_written(recorded: Path) -> None:
    before = fingerprint(recorded)
    assert raw(recorded / "run.json")["schema_version"] == 1  # the older layout, as recorded
    run = RunRecord.load(RunDir(recorded))
    assert run.candidate_arm == "cuda135" and [s.folder for s in run.stages] == [
        "10-build",
        "20-compile",
        "30-numerics",
        "40-serving",
        "50-soak",
        "60-bench",
    ]
    assert RunRecord.parse(run.run, run.to_json()) == run
    stages = [StageRecord.load(p) for p in stage_files(recorded)]
    results = [CheckResult.load(p) for p in result_files(recorded)]
    assert len(stages) == 6 and len(results) == 7
    for stage in stages:
        assert stage.complete and stage.checks, stage.path
        assert StageRecord.parse(stage.path, stage.to_json()) == stage
    for result in results:
        assert result.verdict and result.judged, result.path
        assert CheckResult.parse(result.path, result.to_json()) == result
    assert fingerprint(recorded) == before, "loading a recorded run wrote to it"


def test_load_save_load_keeps_every_key(copy: Path) -> None:
    """Keys no field covers (here one no qualify writes) survive a load, a save and a load."""
    for path in [copy / "run.json", *stage_files(copy), *result_files(copy)]:
        document = raw(path)
        document["kept_as_it_is"] = {"nested": [1, "two", None]}
        write(path, document)
    run = RunRecord.load(RunDir(copy))
    run.save()
    again = RunRecord.load(RunDir(copy))
    assert again == run and again.document["kept_as_it_is"] == {"nested": [1, "two", None]}
    for path in stage_files(copy):
        stage = StageRecord.load(path)
        stage.save()
        assert StageRecord.load(path) == stage
    for path in result_files(copy):
        before = raw(path)
        result = CheckResult.load(path)
        result.save()
        assert CheckResult.load(path) == result
        after = raw(path)
        # Same keys, same values: only the version stamp moved.
        assert {k: v for k, v in after.items() if k != "schema_version"} == {
            k: v for k, v in before.items() if k != "schema_version"
        }
        assert after["schema_version"] == current()


def test_a_field_changed_on_the_record_is_saved_over_its_key(copy: Path, recorded: Path) -> None:
    path = stage_files(copy)[0]
    stage = StageRecord.load(path)
    assert stage.verdict == "WARN"
    stage.model_copy(update={"reason": "said again"}).save()
    saved = raw(path)
    assert saved["reason"] == "said again" and saved["verdict"] == "WARN"
    assert saved["config"] == raw(recorded / path.relative_to(copy))["config"]


def test_an_update_parses_run_json_once_to_read_it_and_once_to_check_the_change(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One `update_run` checks run.json twice: the load, and the changed document. A record is
    its document, read through its types: saving one as read writes the document as read, checked
    when it was, and a record has no field to change but through `updated`."""
    import dataclasses

    from qualify.records import run as records

    parses = []
    real = records.RunDocument.read
    monkeypatch.setattr(records.RunDocument, "read", lambda *a: parses.append(1) or real(*a))
    saved = records.update_run(RunDir(copy), status="complete")
    assert len(parses) == 2 and raw(copy / "run.json")["status"] == "complete"
    parses.clear()
    records.RunRecord.load(RunDir(copy)).save()
    assert len(parses) == 1 and RunRecord.load(RunDir(copy)) == saved
    with pytest.raises(TypeError):  # a property of the typed document, not a field
        dataclasses.replace(saved, status="running")  # type: ignore[call-arg]


# (b) a version 1 document is read as the current layout; a newer one is refused.


def test_a_version_1_run_json_is_migrated_on_load_and_its_file_left_alone(copy: Path) -> None:
    on_disk = (copy / "run.json").read_bytes()
    saved = raw(copy / "run.json")
    assert "nix_options" not in saved["options"] and "candidates" not in saved["invocations"][0]
    record = RunRecord.load(RunDir(copy))
    document = record.document
    # What migrations.run_1_to_2 says a version 1 run meant: no nix options, its one candidate,
    # no controls.
    assert document["options"] == {**saved["options"], "nix_options": []}
    assert document["invocations"] == [
        {**saved["invocations"][0], "candidates": ["cuda135"], "controls": False, "nix_options": []}
    ]
    assert "schema_version" not in document
    assert {k: v for k, v in document.items() if k not in ("options", "invocations")} == {
        k: v for k, v in saved.items() if k not in ("options", "invocations", "schema_version")
    }
    assert (copy / "run.json").read_bytes() == on_disk
    # Saved, it is a current document that reads the same.
    record.save()
    assert raw(copy / "run.json")["schema_version"] == current()
    assert RunRecord.load(RunDir(copy)) == record


def test_a_version_1_result_without_what_was_judged_reads_with_none(copy: Path) -> None:
    path = result_files(copy)[0]
    document = raw(path)
    for key in ("judged", "charts"):
        document.pop(key)
    write(path, {**document, "schema_version": 1})
    result = CheckResult.load(path)
    assert result.judged == [] and result.charts == []
    assert result.to_json()["judged"] == [] and result.to_json()["charts"] == []
    assert "judged" not in raw(path)


def test_every_record_has_a_step_from_each_older_version() -> None:
    from qualify.records.migrations import RESULT_STEPS, RUN_STEPS, STAGE_STEPS

    for steps in (RUN_STEPS, STAGE_STEPS, RESULT_STEPS):
        assert set(steps) == set(range(1, current()))


def test_a_record_newer_than_this_qualify_is_refused_naming_the_file(copy: Path) -> None:
    newer = current() + 1
    for path, load in (
        (copy / "run.json", lambda p: RunRecord.load(RunDir(p.parent))),
        (stage_files(copy)[0], StageRecord.load),
        (result_files(copy)[0], CheckResult.load),
    ):
        write(path, {**raw(path), "schema_version": newer})
        with pytest.raises(RunStoreError) as refused:
            load(path)
        assert str(path) in refused.value.message
        assert f"schema_version {newer} is newer than this qualify understands ({current()})" in (
            refused.value.message
        )


def test_a_new_run_writes_its_records_at_the_current_version(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    result = CliRunner().invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    assert result.exit_code == 3, result.output  # the stages the plan lacks are not configured
    [run] = p.run_dirs()
    for path in (
        run / "run.json",
        run / "20-compile" / "stage.json",
        run / "20-compile" / "compile-check" / "result.json",
    ):
        assert raw(path)["schema_version"] == current(), path
    measurement = run / "20-compile" / "compile-check" / "candidate" / "measurement.json"
    assert raw(measurement)["schema_version"] == 1  # other files keep their own version
    record = RunRecord.load(RunDir(run))
    assert record.document["invocations"][0]["candidates"] == ["cand"]
    assert "kind" not in raw(run / "run.json")  # a run of one, as ever


# (c) the recorded run re-judges to the verdicts it recorded.


def test_the_recorded_run_rejudges_to_the_verdicts_it_saved(
    rejudge_recorded: Rejudge, copy: Path, recorded: Path
) -> None:
    rejudge_recorded(EXAMPLE, copy)
    stages = {p.parent.name: raw(p) for p in stage_files(recorded)}
    assert stages and set(stages) == {p.parent.name for p in stage_files(copy)}
    for folder, before in stages.items():
        after = StageRecord.load(copy / folder / "stage.json")
        assert after.verdict == before["verdict"], folder
        assert [(c.name, c.verdict) for c in after.checks] == [
            (c["name"], c["verdict"]) for c in before["checks"]
        ], folder
        # The same keys as recorded (a first rejudgement of a stage whose verdict moved would add
        # verdict_before_rejudge; none moves here).
        assert set(raw(copy / folder / "stage.json")) == set(before), folder
    for path in result_files(recorded):
        again = copy / path.relative_to(recorded)
        assert CheckResult.load(again).verdict == raw(path)["verdict"], again
        assert set(raw(again)) == set(raw(path)), again
    report = raw(copy / "report.json")
    # The default order gained the distribution stage after the run was recorded: its plan never
    # had one, so the report shows it NOT CONFIGURED beside the stages as recorded.
    shown = {s["name"]: s["outcome"] for s in report["stages"]}
    assert shown == {**raw(recorded / "run.json")["stages"], "distribution": "NOT CONFIGURED"}
    assert report["verdict"] == raw(recorded / "run.json")["verdict"]
    assert raw(copy / "run.json")["schema_version"] == current()


# (d) a malformed document is refused, naming the file and the key.


def refused(load: Callable[[Path], object], path: Path) -> str:
    with pytest.raises(RunStoreError) as caught:
        load(path)
    return caught.value.message


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.update(verdict="MAYBE"), "verdict 'MAYBE' is not one of PASS, WARN"),
        (lambda d: d["checks"][0].update(verdict="GOOD"), "checks[0].verdict 'GOOD' is not one of"),
        (lambda d: d.update(checks={"arms": "PASS"}), "checks is an object, not a list"),
        (lambda d: d.update(folder="../x"), "folder '../x': it starts with '.'"),
        (lambda d: d["checks"][0].update(name="../arms"), "checks[0].name '../arms'"),
        (lambda d: d["checks"][0].pop("kind"), "checks[0].kind is null, not a string"),
        (lambda d: d["checks"][0].update(weight=2), "checks[0].weight: not a field this qualify knows"),
        (lambda d: d.update(attempt="2"), "attempt is a string, not a whole number"),
        (lambda d: d.update(status="done"), "status 'done' is not one of running, complete, interrupted"),
        (lambda d: d.pop("status"), "status None is not one of running, complete, interrupted"),
        (lambda d: d.update(ungated="no"), "ungated is a string, not true or false"),
        (lambda d: d.update(duration_s="1 h"), "duration_s is a string, not a number of seconds"),
        (lambda d: d.update(duration_s=float("inf")), "duration_s is inf, not a finite number of seconds"),
        (lambda d: d.update(duration_s=10**400), "not a finite number of seconds"),
        (lambda d: d.update(stale={"since": "now"}), "stale.inputs_hash_now is null, not a string"),
        (lambda d: d.update(spec=["build"]), "spec is a list, not an object"),
    ],
)
def test_a_malformed_stage_json_is_refused(
    copy: Path, change: Callable[[dict[str, Any]], None], said: str
) -> None:
    path = copy / "10-build" / "stage.json"
    document = raw(path)
    change(document)
    write(path, document)
    message = refused(StageRecord.load, path)
    assert str(path) in message and said in message, message


def test_a_malformed_result_json_is_refused(copy: Path) -> None:
    path = copy / "10-build" / "arms" / "result.json"
    write(path, {**raw(path), "verdict": "OK"})
    message = refused(CheckResult.load, path)
    assert str(path) in message and "verdict 'OK' is not one of" in message, message
    write(path, {**raw(path), "verdict": "WARN", "tables": {"title": "x"}})
    message = refused(CheckResult.load, path)
    assert str(path) in message and "tables is an object, not a list" in message, message


def test_a_malformed_run_json_is_refused(copy: Path) -> None:
    path = copy / "run.json"
    original = raw(path)
    document = json.loads(json.dumps(original))
    document["plan"]["stages"][1]["folder"] = "../x"
    write(path, document)
    message = refused(lambda p: RunRecord.load(RunDir(p.parent)), path)
    assert str(path) in message and "plan.stages[1] folder '../x'" in message, message
    write(path, {**original, "status": "finished"})
    message = refused(lambda p: RunRecord.load(RunDir(p.parent)), path)
    assert str(path) in message and "status 'finished' is not one of" in message, message


def test_a_writer_cannot_save_what_a_reader_would_refuse(tmp_path: Path) -> None:
    path = tmp_path / "10-build" / "stage.json"
    with pytest.raises(RunStoreError, match="verdict 'DONE'"):
        StageRecord.parse(path, {"name": "build", "status": "complete", "verdict": "DONE", "checks": []})
    stage = StageRecord.parse(path, {"name": "build", "status": "running", "checks": []})
    with pytest.raises(RunStoreError, match="checks\\[0\\]\\.verdict 'NEW'"):
        stage.updated(checks=[{"name": "arms", "kind": "nix-build", "verdict": "NEW", "reason": ""}])
    with pytest.raises(RunStoreError, match="verdict 'DONE'"):
        stage.model_copy(update={"status": "complete", "verdict": "DONE"}).save()
    assert not path.exists()


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d["spec"].update(limits="tight"), "spec.limits is a string, not an object"),
        (lambda d: d["spec"].update(kind=7), "spec.kind is a number, not a string"),
        (lambda d: d["spec"].update(timeout_s="1h"), "spec.timeout_s is a string, not a number of seconds"),
        (lambda d: d.update(spec=["arms"]), "spec is a list, not an object"),
        (lambda d: d.update(stage=10), "stage is a number, not a string"),
        (lambda d: d.update(roles=["candidate"]), "roles is a list, not an object"),
        (
            lambda d: d.update(findings=[{"verdict": "FAIL", "mesage": "x", "role": None}]),
            "findings[0].message is null, not a string",
        ),
        (lambda d: d.update(findings=[{"verdict": "FAIL", "message": "x"}]), "findings[0].role is missing"),
        (
            lambda d: d.update(findings=[{"verdict": "FAIL", "message": "x", "role": None, "level": 1}]),
            "findings[0].level: not a field this qualify knows",
        ),
        (
            lambda d: d.update(roles={"candidate": {"out": "/nix/store/x"}}),
            "roles.candidate.arm is null, not a string",
        ),
        (lambda d: d["spec"].update(retries=2), "spec.retries: not a field this qualify knows"),
        (lambda d: d.update(judged=[1]), "judged[0] is a number, not a string"),
        (
            lambda d: d.update(facts={"limits_of_evidence": [2]}),
            "facts.limits_of_evidence[0] is a number, not a string",
        ),
        (lambda d: d.update(crashed=False), "crashed is a boolean, not a string"),
    ],
)
def test_a_result_json_whose_spec_stage_roles_or_findings_are_malformed_is_refused(
    copy: Path, change: Callable[[dict[str, Any]], None], said: str
) -> None:
    path = copy / "10-build" / "arms" / "result.json"
    document = raw(path)
    change(document)
    write(path, document)
    message = refused(CheckResult.load, path)
    assert str(path) in message and said in message, message


def test_a_result_reads_its_spec_and_findings_as_types(copy: Path) -> None:
    path = copy / "10-build" / "arms" / "result.json"
    document = raw(path)
    result = CheckResult.load(path)
    assert result.spec.kind == document["spec"]["kind"] and result.spec.limits == document["spec"]["limits"]
    assert result.stage == document["stage"] and tuple(result.roles) == tuple(document["roles"])
    assert [f.as_json() for f in result.findings] == document["findings"]
    assert result.to_json() == {k: v for k, v in document.items() if k != "schema_version"}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda d: d.update(rejudged=[{"at": "now", "plan": 3}]),
            "rejudged[0].plan is a number, not a string",
        ),
        (
            lambda d: d.update(rejudged=[{"at": "now", "plan": "p", "changed": [{"stage": "build"}]}]),
            "rejudged[0].changed[0].check is null, not a string",
        ),
        (
            lambda d: d.update(
                rejudged=[
                    {
                        "at": "now",
                        "plan": "p",
                        "changed": [
                            {
                                "stage": "s",
                                "check": "c",
                                "before": "PASS",
                                "after": "FAIL",
                                "limits_after": [1],
                            }
                        ],
                    }
                ]
            ),
            "rejudged[0].changed[0].limits_after is a list, not an object",
        ),
        (lambda d: d.update(project={"root": 5}), "project.root is a number, not a string"),
        (lambda d: d.update(project="here"), "project is a string, not an object"),
        (lambda d: d["plan"]["stages"][0].update(file=["a"]), "plan.stages[0].file is a list, not a string"),
        (
            lambda d: d["plan"]["stages"][0].update(checks={"x": 1}),
            "plan.stages[0].checks is an object, not a list",
        ),
        (
            lambda d: d["plan"]["stages"][0]["checks"][0].update(params="alpha"),
            "plan.stages[0].checks[0].params is a string, not an object",
        ),
        (lambda d: d["roles"]["candidate"].pop("arm"), "roles.candidate.arm is null, not a string"),
        (lambda d: d["roles"]["candidate"].update(out=5), "roles.candidate.out is a number, not a string"),
        (
            lambda d: d["provenance"]["gpus"].append({"name": "H200", "memory_mib": "lots"}),
            "].memory_mib is a string, not a whole number",
        ),
        (
            lambda d: d["provenance"]["host"].update(uptime=3),
            "provenance.host.uptime: not a field this qualify knows",
        ),
        (
            lambda d: d["provenance"]["git"].update(dirty="yes"),
            "provenance.git.dirty is a string, not true or false",
        ),
        (
            lambda d: d["options"].update(allow_dirty="no"),
            "options.allow_dirty is a string, not true or false",
        ),
        (lambda d: d["options"].update(nix_options=[["a", 1]]), "options.nix_options[0][1] is a number"),
        (lambda d: d.update(timings={"build": "1s"}), "timings.build is a string, not a number"),
        (lambda d: d.update(sequence=0), "sequence is 0, less than 1"),
        (lambda d: d.update(kind="batch"), "kind 'batch' is not one of run, set, fleet"),
        (lambda d: d.update(invocations={"at": "now"}), "invocations is an object, not a list"),
        (
            lambda d: d.update(set={"label": "x", "arm": "a", "role": "pinned"}),
            "set.role 'pinned' is not one of candidate, positive, negative",
        ),
        (lambda d: d["plan"].update(builtin="no"), "plan.builtin is a string, not true or false"),
        (lambda d: d["plan"].update(not_applicable={"soak": 1}), "plan.not_applicable.soak is a number"),
        (lambda d: d["plan"]["stages"][0].pop("folder"), "plan.stages[0].folder is null, not a string"),
        (
            lambda d: d["plan"]["stages"][0]["checks"][0].update(limits={"x": "tight"}),
            "plan.stages[0].checks[0].limits.x is a string, not a number",
        ),
    ],
)
def test_a_malformed_run_json_is_refused_naming_the_key(
    copy: Path, change: Callable[[dict[str, Any]], None], said: str
) -> None:
    path = copy / "run.json"
    document = raw(path)
    change(document)
    write(path, document)
    message = refused(lambda p: RunRecord.load(RunDir(p.parent)), path)
    assert str(path) in message and said in message, message


def test_a_run_reads_its_rejudgements_and_project_as_types(copy: Path) -> None:
    path = copy / "run.json"
    change = {"stage": "build", "check": "arms", "before": "PASS", "after": "FAIL", "limits_before": {}}
    write(path, {**raw(path), "rejudged": [{"at": "t", "plan": "p", "changed": [change]}]})
    record = RunRecord.load(RunDir(copy))
    assert [r.as_json() for r in record.rejudged] == [{"at": "t", "plan": "p", "changed": [change]}]
    assert record.rejudged[0].changed[0].after == "FAIL" and record.rejudged[0].changed[0].limits_after == {}
    assert record.project_root == raw(path).get("project", {}).get("root")
    assert record.stages[0].file == raw(path)["plan"]["stages"][0].get("file")


def test_a_nan_a_judge_wrote_among_the_facts_is_saved_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "arms" / "result.json"
    path.parent.mkdir()
    facts = {"spread": float("nan"), "limits_of_evidence": ["one pair"]}
    CheckResult.parse(path, {"verdict": "WARN", "kind": "not-a-kind-here", "facts": facts}).save()
    saved = raw(path)
    assert math.isnan(saved["facts"]["spread"])
    result = CheckResult.load(path)
    assert result.check == "arms" and result.limits_of_evidence == ["one pair"] and result.evidence is None
    assert "check" not in saved  # a name the record left out is its folder's, and stays left out


def test_a_run_reads_its_provenance_options_and_plan_as_types(recorded: Path) -> None:
    from qualify.core.provenance import RecordedGpu

    document = raw(recorded / "run.json")
    record = RunRecord.load(RunDir(recorded))
    assert record.host.hostname == document["provenance"]["host"]["hostname"]
    assert record.git.rev is None and record.git.note == document["provenance"]["git"]["note"]
    assert record.git.as_json() == document["provenance"]["git"]
    assert record.provenance.as_json()["host"] == document["provenance"]["host"]
    assert all(isinstance(g, RecordedGpu) for g in record.gpus)
    assert record.options.allow_dirty is False and record.options.nix_options == []  # migrated
    assert record.timings == document["timings"] and record.builtin_plan is document["plan"]["builtin"]
    assert record.roles["candidate"].arm == "cuda135" and record.stages[0].inconclusive == "fail"
    assert record.stages[2].check_params[0] == document["plan"]["stages"][2]["checks"][0]["params"]


def test_a_recorded_gpu_is_described_from_its_fields() -> None:
    from qualify.core.provenance import RecordedGpu, describe_gpu

    gpu = RecordedGpu(name="NVIDIA H100", target="sm_90", driver="580", memory_mib=81559)
    assert describe_gpu(gpu) == "NVIDIA H100 (sm_90), driver 580, 81559 MiB"
    assert describe_gpu(gpu.as_json()) == describe_gpu(gpu)
    assert gpu.as_json() == {"name": "NVIDIA H100", "target": "sm_90", "driver": "580", "memory_mib": 81559}


def test_every_recorded_run_json_loads_and_reads_back_as_it_was(tmp_path: Path) -> None:
    """Every run, set member and bisect step recorded by an earlier qualify, in every example."""
    archives = sorted((EXAMPLE.parent).glob("*/recorded/**/*.tar.xz"))
    loaded = 0
    for archive in archives:
        folder = unpack(archive, tmp_path / archive.name)
        for path in sorted(folder.rglob("run.json")):
            record = RunRecord.load(RunDir(path.parent))
            document = {k: v for k, v in raw(path).items() if k != "schema_version"}
            kept = record.to_json()
            # What migrations.run_1_to_2 adds to a version 1 run; every other key as recorded.
            assert {k: v for k, v in kept.items() if k not in ("options", "invocations")} == {
                k: v for k, v in document.items() if k not in ("options", "invocations")
            }, path
            assert RunRecord.parse(record.run, kept) == record, path
            loaded += 1
    assert len(archives) >= 10 and loaded >= 30
