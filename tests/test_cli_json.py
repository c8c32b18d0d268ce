"""--json on the commands a script reads: JSON on stdout alone, messages on stderr."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Project, command_stage, qualify_proc


def test_run_runs_show_plan_and_doctor_speak_json(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    where = ("--project", str(p.root))
    done = qualify_proc("run", "--candidate", "cand", "--json", *where)
    outcome = json.loads(done.stdout)  # nothing else on stdout
    assert done.returncode == 3 == outcome["exit_code"]
    assert outcome["verdict"] == "INCOMPLETE" and outcome["stages"]["compile"] == "PASS"
    assert outcome["stages"]["bench"] == "NOT CONFIGURED"
    assert outcome["report"]["junit"].endswith("junit.xml") and "compile" in done.stderr
    [entry] = json.loads(qualify_proc("runs", "--json", *where).stdout)
    assert entry["run_id"] == outcome["run_id"] and entry["status"] == "complete"
    shown = json.loads(qualify_proc("show", outcome["run_id"], "--json", *where).stdout)
    assert shown["verdict"] == "INCOMPLETE"
    plan = json.loads(qualify_proc("plan", "--json", *where).stdout)
    assert [s["name"] for s in plan["stages"]] == ["compile"] and "bench" in plan["not_configured"]
    probes = json.loads(qualify_proc("doctor", "--json").stdout)
    assert any(probe["what"] == "nix" for probe in probes)


def test_kernels_json_keeps_messages_off_stdout(tmp_path) -> None:
    (tmp_path / "empty.bin").write_bytes(b"not a kernel")
    done = qualify_proc("kernels", str(tmp_path / "empty.bin"), "--json")
    assert done.stdout == "" and "no kernels found" in done.stderr


def test_qualify_alone_prints_help_and_exits_0() -> None:
    done = qualify_proc()
    assert done.returncode == 0 and "qualify [OPTIONS] COMMAND" in done.stdout and "Commands" in done.stdout
    short = qualify_proc("run", "-h")
    assert short.returncode == 0 and "qualify run [OPTIONS]" in short.stdout


def test_a_ci_log_hears_from_a_silent_stage(project: Callable[..., Project]) -> None:
    """Off a terminal, a stage that prints nothing for longer than the heartbeat still gets a
    line saying it runs and for how long (the heartbeat shortened to 1 s here)."""
    from io import StringIO

    from rich.console import Console

    from qualify.console import ConsoleEvents
    from qualify.pipeline.runner import RunRequest, execute

    p = project()
    p.stage("20-compile.toml", command_stage("compile", "sleep 3"))
    out = StringIO()
    execute(
        RunRequest(project=p.root, candidates=("cand",)),
        ConsoleEvents(Console(file=out, width=200), heartbeat_s=1.0),
    )
    lines = [line for line in out.getvalue().splitlines() if "still running" in line]
    assert len(lines) >= 2 and "compile still running" in lines[0] and "s so far" in lines[0]


@pytest.mark.nix  # and exits 0 with it
def test_doctor_exits_non_zero_when_a_run_could_not_go(tmp_path) -> None:
    """With nix off PATH (a folder holding only git), doctor says so and exits 1."""
    import os
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "/usr/bin/git")
    done = qualify_proc("doctor", env={**os.environ, "PATH": str(bin_dir)})
    assert done.returncode == 1 and "a run needs what is missing here: nix" in done.stderr
    assert qualify_proc("doctor").returncode == 0  # this machine has nix


def test_plan_reads_at_80_columns_in_toml_syntax() -> None:
    import os

    from conftest import REPO

    done = qualify_proc(
        "plan", "-C", str(REPO / "examples" / "llama-cpp"), env={**os.environ, "COLUMNS": "80"}
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert '    paths = ["bin/*"]' in lines and '    copy = "{out}/share/tests"' in lines
    assert any(line.startswith("    limits = { max_mean_kld = ") for line in lines)
    assert not any(c in done.stdout for c in "┃━…")  # no table to cut values short


def test_override_input_as_nix_spells_it(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    done = qualify_proc(
        "run", "--candidate", "cand", "--override-input", "nixpkgs", "path:/x",
        "--nix-option", "builders-use-substitutes", "true", "--project", str(p.root),
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    [run] = p.run_dirs()
    options = json.loads((run / "run.json").read_text())["options"]
    assert options["override_inputs"] == [["nixpkgs", "path:/x"]]
    assert options["nix_options"] == [["builders-use-substitutes", "true"]]


def test_a_host_label_is_kept_with_the_run_and_named_in_its_reports(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    where = ("--project", str(p.root))
    done = qualify_proc("run", "--candidate", "cand", "--host-label", "gfx1151-runner-3", "--json", *where)
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["provenance"]["host"]["label"] == "gfx1151-runner-3"
    assert " · gfx1151-runner-3 (" in (run_dir / "summary.md").read_text()
    assert "<strong>gfx1151-runner-3</strong>" in (run_dir / "report.html").read_text()
