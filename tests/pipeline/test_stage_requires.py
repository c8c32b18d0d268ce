"""A stage that needs what this host lacks (an AMD GPU of the plan's targets, a driver) says so
through its `requires` command: asked before the stage runs, a failing answer makes each of its
checks SKIPPED with the command's words as the reason, never PASS, and the run INCOMPLETE.

Real projects and real commands: `requires` is a shell command that exits non-zero as a host
without the device does (as examples/llama-cpp-rocm/amd-device.sh does on a machine with no
/dev/kfd)."""

from __future__ import annotations

import json
from collections.abc import Callable

from conftest import Project, command_stage
from typer.testing import CliRunner

from qualify.cli import app

runner = CliRunner()


def cli(project: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(project.root)], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def needs(answer: str) -> str:
    return f"requires = '''{answer}'''\n"


def test_a_stage_this_host_cannot_run_is_skipped_with_the_reason(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    marker = p.root / "measured"
    body = command_stage("numerics", f"touch {marker}")
    p.stage("30-numerics.toml", needs("sh -c 'echo no AMD GPU of gfx942 here >&2; exit 75'") + body)
    p.stage("60-bench.toml", command_stage("bench", "true"))
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 3, out  # INCOMPLETE: a stage not measured is never passed
    [run] = p.run_dirs()
    stage = json.loads((run / "30-numerics" / "stage.json").read_text())
    assert stage["verdict"] == "SKIPPED" and "no AMD GPU of gfx942 here" in stage["reason"]
    result = json.loads((run / "30-numerics" / "numerics-check" / "result.json").read_text())
    assert result["verdict"] == "SKIPPED" and "not run on this host" in result["reason"]
    assert not marker.exists()  # nothing of the stage ran
    # A skipped stage does not gate: the stages after it are asked on their own.
    assert json.loads((run / "60-bench" / "stage.json").read_text())["verdict"] == "PASS"
    code, shown = cli(p, "show", run.name)
    assert "numerics SKIPPED" in " ".join(shown.split()), shown


def test_a_host_that_can_runs_it_and_a_resume_asks_again(project: Callable[..., Project]) -> None:
    p = project()
    flag = p.root / "has-device"
    p.stage("20-compile.toml", command_stage("compile", "true"))
    p.stage(
        "30-numerics.toml",
        needs(f"sh -c 'test -e {flag} || {{{{ echo no device >&2; exit 75; }}}}'")
        + command_stage("numerics", "true"),
    )
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 3, out
    [run] = p.run_dirs()
    assert json.loads((run / "30-numerics" / "stage.json").read_text())["verdict"] == "SKIPPED"
    flag.write_text("")  # the same run, resumed where the device is
    code, out = cli(p, "run", "--run", run.name)
    assert code == 3, out  # later stages of the default order are not configured
    stage = json.loads((run / "30-numerics" / "stage.json").read_text())
    assert stage["verdict"] == "PASS" and stage["attempt"] == 2


def test_an_unknown_placeholder_in_requires_is_refused_at_the_plan(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("30-numerics.toml", needs("{project}/amd-device.sh {targts}") + command_stage("numerics", "true"))
    code, out = cli(p, "plan")
    assert code == 4, out
    said = " ".join(out.split())
    assert "30-numerics.toml:1: requires: unknown placeholder {targts}" in said, said
    p.stage(
        "30-numerics.toml", needs("sh -c 'test -e x || { exit 75; }'") + command_stage("numerics", "true")
    )
    code, out = cli(p, "plan")
    assert code == 4 and "requires" in out and "brace" in out, out
