"""The CLI through typer's CliRunner and as a real process: commands and exit codes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, Project, command_stage, qualify_proc
from typer.testing import CliRunner

from qualify.cli import app

HELPERS = Path(__file__).parent / "helpers"

runner = CliRunner()


def test_usage_errors_exit_4_not_click_s_2(project: Callable[..., Project]) -> None:
    result = runner.invoke(app, ["run", "--no-such-option"])
    assert result.exit_code == 4
    proc = qualify_proc("run", "--no-such-option")
    assert proc.returncode == 4
    assert "No such option" in proc.stderr
    assert qualify_proc("frobnicate").returncode == 4


def test_config_error_exit_4_without_traceback(project: Callable[..., Project]) -> None:
    p = project("[arms.pinned]\ninstalable = 'x'\n")
    proc = qualify_proc("run", "--candidate", "pinned", "--project", str(p.root))
    assert proc.returncode == 4
    assert "Traceback" not in proc.stderr
    assert 'did you mean "installable"' in proc.stderr
    debug = qualify_proc("--debug", "run", "--candidate", "pinned", "--project", str(p.root))
    assert "Traceback" in debug.stderr


def test_unknown_candidate_arm_is_a_usage_error(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    proc = qualify_proc("run", "--candidate", "cnad", "--project", str(p.root))
    assert proc.returncode == 4
    assert "no arm named 'cnad' for the candidate role" in proc.stderr
    assert not p.runs.exists() or not list(p.runs.iterdir())  # nothing half-made


def test_unreadable_run_directory_is_exit_2(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    assert qualify_proc("run", "--candidate", "cand", "--project", str(p.root)).returncode == 3
    run = p.run_dirs()[0]
    (run / "run.json").write_text('{"schema_version": 99}')
    proc = qualify_proc("report", run.name, "--project", str(p.root))
    assert proc.returncode == 2
    assert "newer than this qualify" in proc.stderr
    (run / "run.json").write_text("{torn")
    proc = qualify_proc("show", run.name, "--project", str(p.root))
    assert proc.returncode == 2 and "unreadable" in proc.stderr


def test_locked_run_is_refused_with_exit_2(project: Callable[..., Project]) -> None:
    import fcntl

    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    run = p.run_dirs()[0]
    with (run / "lock").open("a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        handle.write("qualify pid 4242\n")
        handle.flush()
        proc = qualify_proc("run", "--run", run.name, "--force", "--project", str(p.root))
    assert proc.returncode == 2
    assert f"run {run.name} is being written by" in proc.stderr


def test_plan_shows_not_configured_stages(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("30-numerics.toml", command_stage("numerics", "true"))
    result = runner.invoke(app, ["plan", "--project", str(p.root)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in ("build", "compile", "serving", "soak", "bench", "distribution"):
        assert re.search(rf"{name}\s.*NOT CONFIGURED", result.output), name
    assert "numerics-check" in result.output


def test_plan_without_project_shows_the_builtin_plan(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "--project", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "built-in default plan" in result.output
    assert "operator-tests" in result.output


def test_runs_show_and_report(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    p.stage("30-numerics.toml", command_stage("numerics", "false"))
    runner.invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    run = p.run_dirs()[0]
    listing = runner.invoke(app, ["runs", "--project", str(p.root)], env={"COLUMNS": "200"})
    assert run.name in listing.output and "NOT QUALIFIED" in listing.output
    shown = runner.invoke(app, ["show", "--project", str(p.root)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "compile PASS" in shown.output and "numerics FAIL" in shown.output
    for name in ("report.html", "summary.md", "report.json"):
        (run / name).unlink()
    proc = qualify_proc("report", str(run))  # a run given by its path, from anywhere
    assert proc.returncode == 0, proc.stderr
    report = json.loads((run / "report.json").read_text())
    assert report["schema_version"] == 1 and report["verdict"] == "NOT QUALIFIED"
    assert [s["name"] for s in report["stages"]] == [
        "build",
        "compile",
        "numerics",
        "serving",
        "soak",
        "bench",
        "distribution",
    ]


def test_report_escapes_engine_output(project: Callable[..., Project]) -> None:
    p = project()
    p.stage(
        "20-compile.toml",
        command_stage("compile", "sh -c 'echo \"<script>alert(1)</script> | cell\"; exit {level}'"),
    )
    p.stage(
        "30-numerics.toml",
        f"""
[[check]]
kind = "tests"
name = "ops"
run = "{{py}} {HELPERS / "write_junit.py"} {{out_file}} '<script>alert(1)</script>|x=passed'"
""",
    )
    runner.invoke(app, ["run", "--candidate", "cand", "--project", str(p.root), "--no-gate"])
    run = p.run_dirs()[0]
    html = (run / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    markdown = (run / "summary.md").read_text()
    assert "<script>" not in markdown and "&lt;script&gt;" in markdown
    # The summary quotes findings, never whole tables: the engine's pipe is escaped there too.
    assert "&lt;/script&gt; \\| cell" in markdown and "| cell" not in markdown.replace("\\| cell", "")


@pytest.mark.nix  # doctor exits 0 only where nix is there
def test_doctor_reports_this_machine() -> None:
    result = runner.invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for what in ("nix", "gcc", "GPUs", "kernel log", "compact_memory"):
        assert what in result.output


def test_init_scaffolds_and_refuses_to_overwrite(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "qualify.toml").is_file() and (tmp_path / "stages" / "20-compile.toml").is_file()
    # Without the project's flake.nix the plan, which builds the arms, is refused at once.
    plan = runner.invoke(app, ["plan", "--project", str(tmp_path)])
    assert plan.exit_code == 4 and "has no flake.nix" in plan.output
    (tmp_path / "flake.nix").write_text("{ outputs = { self }: { }; }\n")
    plan = runner.invoke(app, ["plan", "--project", str(tmp_path)])
    assert plan.exit_code == 0 and "operator-tests" in plan.output
    again = runner.invoke(app, ["init", str(tmp_path)])
    assert again.exit_code == 4 and "already exists" in again.output
    # Every role and placeholder the default plan uses has a value in the scaffolded project.
    from qualify.core.config import load_config
    from qualify.pipeline.plan import load_plan
    from qualify.pipeline.runner import bind_roles

    config = load_config(tmp_path)
    default_plan = load_plan(config.plan_dir)
    assert set(bind_roles(config, default_plan, "candidate", None)) == set(default_plan.roles_needed())
    used = {n for f in (tmp_path / "stages").glob("*.toml") for n in re.findall(r"{(\w+)}", f.read_text())}
    builtins = {"out", "bin", "arm", "role", "dir", "out_file", "run_dir", "port", "installable", "devshell"}
    assert used - builtins - {"project"} <= set(config.vars), used - builtins - set(config.vars)


def test_version() -> None:
    proc = qualify_proc("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("qualify ")


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    match = re.search(r"<!-- test-command -->\s*```sh\n(.+?)\n```", readme, re.S)
    assert match, "README lacks the marked test command block"
    command = match.group(1).strip()
    assert command in ci


def test_nix_missing_before_any_stage_is_exit_2(project: Callable[..., Project]) -> None:
    import os
    import sys

    python_dir = Path(sys.executable).parent
    if (python_dir / "nix").exists():
        pytest.skip("nix shares a directory with this python")
    p = project()
    p.stage("10-build.toml", '[[check]]\nkind = "nix-build"\nname = "arms"\n')
    proc = qualify_proc(
        "run",
        "--candidate",
        "cand",
        "--project",
        str(p.root),
        env={**os.environ, "PATH": f"{python_dir}:/nonexistent"},
    )
    assert proc.returncode == 2, proc.stderr
    assert "nix is not installed" in proc.stderr and "build/arms" in proc.stderr
    assert not p.runs.exists() or not list(p.runs.iterdir())  # refused before making a run
