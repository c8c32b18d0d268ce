"""Broken and half-written records, and the messages of failures: every saved JSON still parses,
a broken file never hides the others, and each message names what it is about."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import PY, Project, command_stage, qualify_proc
from typer.testing import CliRunner

from qualify.build.internaljson import BuildLog
from qualify.cli import app

runner = CliRunner()


def cli(project: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(project.root)], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def every_json_parses(run: Path) -> None:
    for path in run.rglob("*.json"):
        json.loads(path.read_text())


def test_a_corrupt_run_json_is_listed_as_broken_and_the_others_still_show(
    project: Callable[..., Project],
) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    cli(p, "run", "--candidate", "cand")
    cli(p, "run", "--candidate", "cand")
    first, second = p.run_dirs()
    (first / "run.json").write_text('{"schema_version": 1, "status": ')
    code, out = cli(p, "runs")
    assert code == 0, out
    assert second.name in out and first.name in out and "broken" in out
    assert "unreadable" in out


def test_a_corrupt_stage_json_is_moved_aside_by_a_forced_rerun(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    cli(p, "run", "--candidate", "cand")
    [run] = p.run_dirs()
    (run / "20-compile" / "stage.json").write_text("{not json")
    code, out = cli(p, "show", run.name)
    assert code == 0 and "UNREADABLE" in out, out
    code, out = cli(p, "run", "--only", "compile", "--force")
    assert code == 3, out  # later stages not configured
    assert json.loads((run / "20-compile" / "stage.json").read_text())["verdict"] == "PASS"
    assert (run / "20-compile" / "attempts" / "1" / "stage.json").read_text() == "{not json"


def test_a_failing_rerun_restores_the_status(project: Callable[..., Project], monkeypatch) -> None:
    """An --only rerun that fails with something other than an interrupt (here the stage
    runner raising OSError, standing in for a full disk mid-stage) leaves run.json saying so."""
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    cli(p, "run", "--candidate", "cand")
    [run] = p.run_dirs()

    def broken(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("qualify.pipeline.stageloop.StageRunner.execute", broken)
    code, out = cli(p, "run", "--only", "compile", "--force")
    saved = json.loads((run / "run.json").read_text())
    assert code == 2 and saved["status"] == "failed", out
    assert "No space left on device" in saved["error"]


def test_a_run_killed_mid_stage_shows_dead_not_running(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", f"{PY} -c 'import time; time.sleep(60)'"))
    proc = subprocess.Popen(
        [PY, "-m", "qualify", "run", "--candidate", "cand", "--project", str(p.root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = p.run_dirs() if p.runs.exists() else []
        if runs and (runs[0] / "20-compile" / "stage.json").is_file():
            break
        time.sleep(0.1)
    [run] = p.run_dirs()
    code, out = cli(p, "show", run.name)
    assert "RUNNING" in out and "INTERRUPTED" not in out, out  # live: the stage is running
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    code, out = cli(p, "runs")
    assert "dead" in out, out
    code, out = cli(p, "show", run.name)
    assert "(dead)" in out and "INTERRUPTED" in out, out
    every_json_parses(run)


def test_a_timeout_names_its_limit(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "sleep 30", timeout="2"))
    start = time.monotonic()
    cli(p, "run", "--candidate", "cand")
    assert time.monotonic() - start < 25
    [run] = p.run_dirs()
    result = json.loads((run / "20-compile" / "compile-check" / "result.json").read_text())
    assert "stopped at its 2 s limit" in result["reason"], result["reason"]


def test_a_failed_derivation_says_failed() -> None:
    """Lines nix 2.8 writes with --log-format internal-json for a builder exiting 3: the error
    comes after the build's stop, and names the derivation."""
    drv = "/nix/store/izv0r5zs04lxbvcyw5x5dgzahjv3cgxg-fails.drv"
    lines = [
        '@nix {"action":"start","id":7,"level":3,"text":"building \'' + drv + '\'","type":105,'
        '"fields":["' + drv + '","",1,1]}',
        '@nix {"action":"stop","id":7}',
        '@nix {"action":"msg","level":0,"msg":"\\u001b[31;1merror:\\u001b[0m builder for \'\\u001b[35;1m'
        + drv
        + "\\u001b[0m' failed with exit code 3\"}",
    ]
    log = BuildLog()
    log.feed(0.0, lines[0])
    stopped = log.feed(1.0, lines[1])
    assert stopped is not None and stopped.failed is None  # at the stop nix has not said yet
    failed = log.feed(2.0, lines[2])
    assert failed is not None and failed.drv == drv
    assert failed.failed == f"builder for '{drv}' failed with exit code 3"


def test_a_runs_dir_that_is_a_file_is_named(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    (p.root / "runs").write_text("")
    done = qualify_proc("run", "--candidate", "cand", "--project", str(p.root))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and f"{p.root / 'runs'}: the runs directory is not a directory" in said, said
    assert "internal error" not in said
