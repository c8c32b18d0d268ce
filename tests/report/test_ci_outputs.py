"""What a CI system reads from a run: junit.xml (read back with junitparser, as CI tools parse
it), the GitHub step summary and error annotations, escaped as GitHub documents."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import PY, Project, command_stage, qualify_proc
from junitparser import Error, Failure, JUnitXml, Skipped

from qualify.core.runstore import RunDir
from qualify.report.github import (
    MAX_MESSAGE,
    annotation_message,
    error_commands,
    escape_data,
    escape_property,
)
from qualify.report.model import build_model


def three_stages(p: Project) -> Path:
    p.stage("10-build.toml", command_stage("build", "true"))
    p.stage(
        "20-compile.toml",
        command_stage("compile", f'{PY} -c \'import sys; sys.exit(1 if "{{role}}" == "candidate" else 0)\''),
    )
    p.stage("30-numerics.toml", command_stage("numerics", "true"))
    qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    [run] = p.run_dirs()
    return run


def test_junit_has_a_suite_per_stage_and_reads_back(project: Callable[..., Project]) -> None:
    run = three_stages(project())
    xml = JUnitXml.fromfile(str(run / "junit.xml"))
    suites = {suite.name: suite for suite in xml}
    assert {"build", "compile", "numerics", "serving", "soak", "bench", "distribution"} <= set(suites)
    [build] = list(suites["build"])
    assert build.is_passed and build.name == "build-check (command)"
    properties = {p.name: p.value for p in suites["build"].properties()}
    assert properties["build-check.judged.1"] == "candidate exit status"
    assert properties["build-check.verdict"] == "PASS"
    [compile_] = list(suites["compile"])
    [failure] = compile_.result
    assert isinstance(failure, Failure) and "candidate: command exit code 1" in failure.message
    [numerics] = list(suites["numerics"])
    assert isinstance(numerics.result[0], Skipped) and "BLOCKED" in numerics.result[0].message
    [soak] = list(suites["soak"])
    assert isinstance(soak.result[0], Skipped) and "NOT CONFIGURED" in soak.result[0].message
    # The first suite is the verdict itself: a run that did not qualify always fails in CI.
    [verdict] = list(suites["qualify"])
    [not_qualified] = verdict.result
    assert isinstance(not_qualified, Failure) and not_qualified.type == "NOT QUALIFIED"
    assert xml.failures == 2 and xml.errors == 0 and xml.skipped == 5 and xml.tests == 8
    assert not any(isinstance(r, Error) for s in xml for c in s for r in c.result)


def test_github_step_summary_and_annotations(project: Callable[..., Project], tmp_path: Path) -> None:
    p = project()
    run = three_stages(p)
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    done = qualify_proc(
        "report", run.name, "--project", str(p.root),
        env={"PATH": "/usr/bin:/bin", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = summary.read_text()
    assert text.startswith("earlier step\n") and (run / "summary.md").read_text() in text
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert errors == [
        "::error title=qualify compile/compile-check%3A FAIL::candidate: command exit code 1"
    ], done.stdout
    assert json.loads((run / "report.json").read_text())["verdict"] == "NOT QUALIFIED"


def test_workflow_command_escaping() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"


def test_no_annotations_for_a_passing_run(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    [run] = p.run_dirs()
    assert list(error_commands(build_model(RunDir(run)))) == []


@pytest.mark.slow
def test_a_long_finding_is_cut_in_its_annotation(project: Callable[..., Project]) -> None:
    """Before, an annotation carried its finding whole: 7.7 kB of one command's output beside
    the pull request's files. Now at most MAX_MESSAGE characters, saying it was cut, how long it
    was and where the rest is; the report keeps the whole finding."""
    p = project()
    run = three_stages(p)
    [result_json] = (run / "20-compile").rglob("result.json")
    result = json.loads(result_json.read_text())
    long = "candidate: command exit code 1\n" + "\n".join(
        f"ld: undefined symbol ck_gemm_f32_{n}" for n in range(220)
    )
    result["findings"] = [{"verdict": "FAIL", "message": long, "role": None}]
    result_json.write_text(json.dumps(result))
    model = build_model(RunDir(run))
    [compile_check] = [c for s in model.stages if s.name == "compile" for c in s.checks]
    assert [f.message for f in compile_check.findings] == [long]  # the report keeps it whole
    done = qualify_proc(
        "report", run.name, "--project", str(p.root), env={"PATH": "/usr/bin:/bin", "GITHUB_ACTIONS": "true"}
    )
    assert done.returncode == 0, done.stderr
    [error] = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    message = error.split("::", 2)[2]
    assert len(long) > 7000
    assert message.endswith(f" … (cut: {len(long):,} characters in all; the report has the whole finding)")
    unescaped = message.replace("%0A", "\n").replace("%0D", "\r").replace("%25", "%")
    assert len(unescaped) <= MAX_MESSAGE and unescaped.startswith("candidate: command exit code 1\nld: ")
    assert annotation_message("short") == "short"
