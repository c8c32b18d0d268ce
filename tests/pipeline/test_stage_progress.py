"""A check costs the same whether it is a stage's first or its thousandth: a running stage's
stage.json (which holds the stage's whole plan) is saved again when a second has passed, not
after every check, while the seal covers each check's files as soon as the check ends, so that
a resume keeps every check that finished (benchmarks/stage_scale.py measures the cost).

Real runs through the CLI; the interval is set here to save after every check or never."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Project
from typer.testing import CliRunner

from qualify.cli import app
from qualify.pipeline import stagerun
from qualify.records.stage import StageRecord

runner = CliRunner()
CHECKS = 4


def many_checks(project: Project, run: str = "true") -> None:
    lines = ['name = "numerics"']
    for n in range(CHECKS):
        lines += ["[[check]]", 'kind = "command"', f'name = "c{n}"', f"run = '''{run}'''"]
    project.stage("30-numerics.toml", "\n".join(lines) + "\n")


def saves_of_the_stage(project: Project, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Run the project; each save of its stage.json, as its status and how many checks it listed."""
    saved: list[tuple[str, int]] = []
    save = StageRecord.save

    def counted(record: StageRecord, path: Path | None = None) -> None:
        saved.append((record.status, len(record.checks)))
        save(record, path)

    monkeypatch.setattr(StageRecord, "save", counted)
    result = runner.invoke(app, ["run", "--candidate", "cand", "--project", str(project.root)])
    assert result.exit_code == 3, result.output  # INCOMPLETE: the other stages are not configured
    return saved


def test_a_stage_of_quick_checks_saves_its_record_as_it_starts_and_ends(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project()
    many_checks(p)
    monkeypatch.setattr(stagerun, "PROGRESS_S", 3600.0)
    assert saves_of_the_stage(p, monkeypatch) == [("running", 0), ("complete", CHECKS)]
    [run] = p.run_dirs()
    stage = json.loads((run / "30-numerics" / "stage.json").read_text())
    assert [c["name"] for c in stage["checks"]] == [f"c{n}" for n in range(CHECKS)]


def test_a_stage_saved_when_due_lists_every_check_that_ended(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project()
    many_checks(p)
    monkeypatch.setattr(stagerun, "PROGRESS_S", 0.0)
    monkeypatch.setattr(stagerun, "PROGRESS_SHARE", 0)
    running = [("running", n) for n in range(CHECKS + 1)]
    assert saves_of_the_stage(p, monkeypatch) == [*running, ("complete", CHECKS)]


def test_each_check_is_sealed_before_the_next_one_runs(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stage.json saved only at the start: each check's command copies the seal as it is on disk
    then, and finds every earlier check's files in it."""
    p = project()
    many_checks(p, "cp {run_dir}/seal.json {out_file}")
    monkeypatch.setattr(stagerun, "PROGRESS_S", 3600.0)
    saves_of_the_stage(p, monkeypatch)
    [run] = p.run_dirs()
    for n in range(1, CHECKS):
        copied = json.loads((run / "30-numerics" / f"c{n}" / "candidate" / "output").read_text())
        sealed = copied["records"]
        for earlier in range(n):
            folder = f"30-numerics/c{earlier}"
            assert f"{folder}/result.json" in sealed, (n, sorted(sealed))
            assert f"{folder}/candidate/output" in sealed, (n, sorted(sealed))
        assert not any(key.startswith(f"30-numerics/c{n}/") for key in sealed)


def test_a_file_changed_after_the_last_check_stops_the_stage_before_its_verdict(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stage compares every sealed file before it saves its verdict, whatever the checks'
    own comparisons found: a change by anything but qualify is never taken into it."""
    p = project()
    many_checks(p)
    monkeypatch.setattr(stagerun, "PROGRESS_S", 3600.0)
    check = stagerun.StageRunner._check

    def then_changed(runner_: stagerun.StageRunner, *args: Any, **kwargs: Any) -> Any:
        judgement = check(runner_, *args, **kwargs)
        stage, spec, folder = args[:3]
        if spec.name == stage.checks[-1].name:
            (folder / "c0" / "result.json").write_text("{}")  # as a process outside the run would
        return judgement

    monkeypatch.setattr(stagerun.StageRunner, "_check", then_changed)
    result = runner.invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    assert result.exit_code == 2 and "tampered" in result.output, result.output
    assert "30-numerics/c0/result.json" in result.output, result.output
    [run] = p.run_dirs()
    assert json.loads((run / "30-numerics" / "stage.json").read_text())["status"] == "interrupted"
