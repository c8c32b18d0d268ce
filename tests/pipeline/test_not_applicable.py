"""Stages a plan declares not applicable (an engine with no server): the run qualifies on the
stages the plan holds, and every output names the ones it declared, with the reason; a stage
merely missing still keeps the run INCOMPLETE, and every output names it too.

Before, a plan without serving and soak could never be QUALIFIED (every run ended INCOMPLETE,
exit 3, "not configured"), nothing let a plan say they did not apply, `plan` and `doctor` said
nothing about it, and junit.xml of an INCOMPLETE run held no failing case."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage
from typer.testing import CliRunner

from qualify.cli import app
from qualify.core.errors import ConfigError
from qualify.pipeline.plan import load_plan
from qualify.pipeline.plantext import plan_text

runner = CliRunner()
NO_SERVER = 'not_applicable = "the engine has no server"\n'


def cli(project: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(project.root)])
    return result.exit_code, result.output


def passing(project: Project, *names: str) -> None:
    for index, name in enumerate(names, start=1):
        project.stage(f"{index}0-{name}.toml", command_stage(name, f"{PY} -c 'pass'"))


def without_server(project: Project) -> None:
    passing(project, "build", "compile", "numerics")
    project.stage("40-serving.toml", NO_SERVER)
    project.stage("50-soak.toml", NO_SERVER)
    project.stage("60-bench.toml", command_stage("bench", f"{PY} -c 'pass'"))
    project.stage("70-distribution.toml", command_stage("distribution", f"{PY} -c 'pass'"))


def junit_verdict(run: Path) -> ET.Element:
    root = ET.parse(run / "junit.xml").getroot()
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "qualify")
    return next(iter(suite.iter("testcase")))


def test_a_plan_without_a_server_qualifies_and_every_output_says_what_did_not_apply(
    project: Callable[..., Project],
) -> None:
    p = project()
    without_server(p)
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out
    line = "QUALIFIED — serving, soak not applicable: the engine has no server"
    assert line in out
    run = p.run_dirs()[0]
    assert json.loads((run / "report.json").read_text())["verdict_line"] == line
    summary = (run / "summary.md").read_text()
    first = next(x for x in summary.splitlines() if x.startswith("## "))
    assert "**QUALIFIED**" in first and "serving, soak not applicable: the engine has no server" in first
    assert "not applicable: the engine has no server" in (run / "report.html").read_text()
    case = junit_verdict(run)
    assert case.find("failure") is None and case.find("error") is None
    code, shown = cli(p, "show")
    assert code == 0 and line in " ".join(shown.split()), shown
    code, shown = cli(p, "show", "--json")
    document = json.loads(shown)
    assert document["verdict_line"] == line
    assert {s["name"]: s["outcome"] for s in document["stages"]}["soak"] == "NOT APPLICABLE"


def test_a_stage_merely_missing_stays_incomplete_and_every_output_names_it(
    project: Callable[..., Project],
) -> None:
    p = project()
    without_server(p)
    (p.root / "stages" / "50-soak.toml").unlink()
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 3, out
    run = p.run_dirs()[0]
    line = json.loads((run / "report.json").read_text())["verdict_line"]
    assert line.startswith("INCOMPLETE — soak not configured"), line
    assert "serving not applicable: the engine has no server" in line
    case = junit_verdict(run)
    error = case.find("error")
    assert error is not None and "soak not configured" in str(error.get("message"))


def test_junit_of_a_run_that_did_not_qualify_always_fails_or_errs(project: Callable[..., Project]) -> None:
    p = project()
    without_server(p)
    p.stage("20-compile.toml", command_stage("compile", f"{PY} -c 'import sys; sys.exit(1)'"))
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 1, out
    failure = junit_verdict(p.run_dirs()[0]).find("failure")
    assert failure is not None and failure.get("type") == "NOT QUALIFIED"


def test_every_stage_but_the_build_declared_not_applicable_never_qualifies(
    project: Callable[..., Project],
) -> None:
    """Building is not qualifying: a plan that judges nothing of the engine stays INCOMPLETE."""
    p = project()
    passing(p, "build")
    for index, name in enumerate(
        ("compile", "numerics", "serving", "soak", "bench", "distribution"), start=2
    ):
        p.stage(f"{index}0-{name}.toml", NO_SERVER)
    plan = load_plan(p.root / "stages")
    assert any("no stage but the build" in why for why in plan.never_qualifies())
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 3, out
    line = json.loads((p.run_dirs()[0] / "report.json").read_text())["verdict_line"]
    assert line.startswith("INCOMPLETE — no stage but the build measured the engine"), line


def test_plan_and_doctor_say_when_a_plan_can_never_qualify(project: Callable[..., Project]) -> None:
    p = project()
    passing(p, "build", "compile", "bench", "distribution")
    text = plan_text(load_plan(p.root / "stages"))
    assert "never qualifies: numerics, serving, soak are not in the plan" in text
    assert "not_applicable" in text  # says how to declare them
    code, out = cli(p, "doctor")
    # Off a terminal the table is 100 columns wide: a cell's text wraps onto the rows below.
    found = " ".join(line.split("│")[3].strip() for line in out.splitlines() if line.count("│") == 5)
    assert "can qualify" in out and "numerics, serving, soak are not in the plan" in " ".join(
        found.split()
    ), out
    for index, name in ((3, "numerics"), (4, "serving"), (5, "soak")):
        p.stage(f"{index}5-{name}.toml", NO_SERVER)
    text = plan_text(load_plan(p.root / "stages"))
    assert "never qualifies" not in text
    assert "serving  NOT APPLICABLE: the engine has no server" in text


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('name = "build"\n' + NO_SERVER, "builds the arms every other stage measures"),
        ('not_applicable = ""\n', "say why the stage does not apply"),
        (NO_SERVER + '[[check]]\nkind = "command"\nrun = "true"\n', "'check' has no meaning here"),
        (NO_SERVER + 'requires = "true"\n', "'requires' has no meaning here"),
        ('not_applicable = "' + "x" * 200 + '"\n', "at most 160 characters"),
    ],
)
def test_a_declaration_that_cannot_hold_is_refused_naming_the_file(
    project: Callable[..., Project], body: str, words: str
) -> None:
    p = project()
    passing(p, "compile")
    path = p.stage("40-serving.toml", body)
    with pytest.raises(ConfigError) as caught:
        load_plan(p.root / "stages")
    assert str(path) in caught.value.message and words in caught.value.message, caught.value.message


def test_a_negative_control_cannot_be_asked_to_fail_a_stage_that_does_not_apply(
    project: Callable[..., Project],
) -> None:
    p = project(
        """
        [arms.pinned]
        installable = ".#default"
        [arms.cand]
        installable = ".#cand"
        [arms.broken]
        installable = ".#broken"
        [controls]
        negative = { broken = ["serving"] }
        """
    )
    without_server(p)
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 4, out
    assert "declares not applicable (the engine has no server)" in " ".join(out.split())


def test_an_incomplete_set_names_the_stages_that_made_it_so_and_shows_them_as_rows(
    project: Callable[..., Project],
) -> None:
    """Before: the set's headline said only "not decided: cand", and its matrix had no row for
    the stage that caused it (the plan's stages only)."""
    p = project(
        """
        [arms.pinned]
        installable = ".#default"
        [arms.cand]
        installable = ".#cand"
        [controls]
        positive = ["pinned"]
        """
    )
    without_server(p)
    (p.root / "stages" / "50-soak.toml").unlink()
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 3, out
    document = json.loads((p.run_dirs()[0] / "report.json").read_text())
    assert "cand (soak not configured)" in document["verdict_reason"], document["verdict_reason"]
    assert document["verdict_line"].startswith("INCOMPLETE — cand: soak not configured"), document[
        "verdict_line"
    ]
    assert "serving not applicable: the engine has no server" in document["verdict_line"]
    assert {"serving", "soak"} <= set(document["stages"]), document["stages"]
    cells = document["cells"]
    assert cells["soak"]["cand"]["outcome"] == "NOT CONFIGURED"
    assert cells["serving"]["cand"]["outcome"] == "NOT APPLICABLE"
    # Before: the positive control's NOT APPLICABLE cell said "(must pass)"; nothing there can.
    control = next(k for k in cells["serving"] if k != "cand")
    assert cells["serving"][control]["outcome"] == "NOT APPLICABLE"
    assert (
        cells["serving"][control]["expected"] is None and cells["build"][control]["expected"] == "must pass"
    )
    summary = (p.run_dirs()[0] / "summary.md").read_text()
    assert not re.search(r"NOT APPLICABLE\*\* \(must", summary), summary
    failing = junit_verdict(p.run_dirs()[0]).find("error")
    assert failing is not None and "soak not configured" in str(failing.get("message"))
