"""The gated pipeline on real subprocesses: gates, verdicts, exit codes, reruns, resume."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from conftest import PY, Project, command_stage, qualify_proc
from typer.testing import CliRunner

from qualify.cli import app

HELPERS = Path(__file__).resolve().parent.parent / "helpers"
EMIT = f"{PY} {HELPERS / 'emit_metrics.py'}"
JUNIT = f"{PY} {HELPERS / 'write_junit.py'}"
runner = CliRunner()


def cli(project: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(project.root)])
    return result.exit_code, result.output


def stage_json(run: Path, folder: str) -> dict:
    return json.loads((run / folder / "stage.json").read_text())


def run_json(run: Path) -> dict:
    return json.loads((run / "run.json").read_text())


def six_stages(project: Project, failing: str | None = None) -> None:
    """Every stage of the default order, each a command check; `failing` exits 1."""
    for index, name in enumerate(
        ("build", "compile", "numerics", "serving", "soak", "bench", "distribution"), start=1
    ):
        code = 1 if name == failing else 0
        project.stage(
            f"{index}0-{name}.toml",
            command_stage(
                name, f'{PY} -c \'import sys; sys.exit({code} if "{{role}}" == "candidate" else 0)\''
            ),
        )


def test_all_stages_pass_is_qualified_exit_0(project: Callable[..., Project]) -> None:
    p = project()
    six_stages(p)
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out
    run = p.run_dirs()[0]
    assert run_json(run)["verdict"] == "QUALIFIED"
    assert run_json(run)["exit_code"] == 0
    for name in ("report.html", "summary.md", "report.json"):
        assert (run / name).is_file()


def test_failing_stage_blocks_every_later_stage_exit_1(project: Callable[..., Project]) -> None:
    p = project()
    six_stages(p, failing="numerics")
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 1, out
    run = p.run_dirs()[0]
    assert stage_json(run, "30-numerics")["verdict"] == "FAIL"
    for folder in ("40-serving", "50-soak", "60-bench"):
        saved = stage_json(run, folder)
        assert saved["verdict"] == "BLOCKED"
        assert saved["blocked_by"] == "numerics"
        assert not (run / folder / f"{folder.split('-')[1]}-check").exists()  # never ran
    assert run_json(run)["verdict"] == "NOT QUALIFIED"
    assert "BLOCKED" in (run / "summary.md").read_text()


def test_no_gate_runs_past_and_marks_ungated(project: Callable[..., Project]) -> None:
    p = project()
    six_stages(p, failing="compile")
    code, _ = cli(p, "run", "--candidate", "cand", "--no-gate")
    assert code == 1
    run = p.run_dirs()[0]
    later = stage_json(run, "30-numerics")
    assert later["verdict"] == "PASS" and later["ungated"] is True
    assert later["ungated_past"].startswith("compile")
    result = json.loads((run / "30-numerics" / "numerics-check" / "result.json").read_text())
    assert result["ungated"] is True
    assert "ungated" in (run / "summary.md").read_text()
    assert "ungated" in (run / "report.html").read_text()
    assert not stage_json(run, "20-compile")["ungated"]


def margin_stage(project: Project, inconclusive: str) -> None:
    # Pinned median 100; candidate samples straddle the 5 % boundary (95).
    run = f"{EMIT} {{out_file}} {{samples}}"
    project.stage(
        "30-numerics.toml",
        command_stage(
            "numerics", run, inconclusive=inconclusive, metrics="true", limits="{ speed_margin = 0.05 }"
        ),
    )


INCONCLUSIVE_ARMS = """
[arms.pinned]
installable = ".#default"
vars = { samples = "speed:higher:99,100,101" }
[arms.cand]
installable = ".#cand"
vars = { samples = "speed:higher:90,96,99" }
"""


def test_inconclusive_stage_blocks_and_is_not_qualified(project: Callable[..., Project]) -> None:
    p = project(INCONCLUSIVE_ARMS)
    margin_stage(p, "fail")
    p.stage("60-bench.toml", command_stage("bench", "true"))
    code, _ = cli(p, "run", "--candidate", "cand")
    run = p.run_dirs()[0]
    assert stage_json(run, "30-numerics")["verdict"] == "INCONCLUSIVE"
    assert stage_json(run, "60-bench")["verdict"] == "BLOCKED"
    assert code == 1


def test_inconclusive_as_warn_passes_the_gate(project: Callable[..., Project]) -> None:
    p = project(INCONCLUSIVE_ARMS)
    margin_stage(p, "warn")
    p.stage("60-bench.toml", command_stage("bench", "true"))
    code, _ = cli(p, "run", "--candidate", "cand")
    run = p.run_dirs()[0]
    numerics = stage_json(run, "30-numerics")
    assert numerics["verdict"] == "WARN"
    assert numerics["checks"][0]["verdict"] == "INCONCLUSIVE"  # still said
    assert stage_json(run, "60-bench")["verdict"] == "PASS"
    assert code == 3  # the stages that are not configured keep it INCOMPLETE
    assert "inconclusive" in (run / "report.html").read_text()


def test_error_stage_gates_and_run_is_incomplete_exit_3(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "no-such-tool-xyz --flag"))
    p.stage("60-bench.toml", command_stage("bench", "true"))
    code, _ = cli(p, "run", "--candidate", "cand")
    run = p.run_dirs()[0]
    compile_ = stage_json(run, "20-compile")
    assert compile_["verdict"] == "ERROR"
    assert "no-such-tool-xyz" in compile_["reason"]
    assert stage_json(run, "60-bench")["verdict"] == "BLOCKED"
    assert code == 3


def test_only_rerun_keeps_the_old_attempt_and_force(project: Callable[..., Project]) -> None:
    p = project()
    flag = p.root / "flag"
    p.stage("20-compile.toml", command_stage("compile", "true"))
    p.stage(
        "30-numerics.toml",
        command_stage(
            "numerics",
            f"{PY} -c 'import pathlib,sys; sys.exit(0 if pathlib.Path(\"{flag}\").exists() else 1)'",
        ),
    )
    code, _ = cli(p, "run", "--candidate", "cand")
    assert code == 1
    run = p.run_dirs()[0]
    first = stage_json(run, "30-numerics")
    flag.write_text("fixed")
    code, out = cli(p, "run", "--only", "numerics")  # the latest run, by default
    assert len(p.run_dirs()) == 1
    second = stage_json(run, "30-numerics")
    assert second["verdict"] == "PASS" and second["attempt"] == 2
    old = json.loads((run / "30-numerics" / "attempts" / "1" / "stage.json").read_text())
    assert old["verdict"] == "FAIL" and old["started_at"] == first["started_at"]
    assert stage_json(run, "20-compile")["attempt"] == 1  # untouched
    # A PASS with unchanged inputs is kept unless --force.
    cli(p, "run", "--only", "numerics", "--run", run.name)
    assert stage_json(run, "30-numerics")["attempt"] == 2
    cli(p, "run", "--only", "numerics", "--run", run.name, "--force")
    assert stage_json(run, "30-numerics")["attempt"] == 3
    assert sorted(x.name for x in (run / "30-numerics" / "attempts").iterdir()) == ["1", "2"]
    assert len(run_json(run)["invocations"]) == 4


def test_from_reruns_the_stage_and_later_ones(project: Callable[..., Project]) -> None:
    p = project()
    for i, name in enumerate(("compile", "numerics", "bench"), start=2):
        p.stage(f"{i}0-{name}.toml", command_stage(name, f"{PY} -c 'print(1)'"))
    cli(p, "run", "--candidate", "cand")
    run = p.run_dirs()[0]
    cli(p, "run", "--from", "numerics", "--force")
    assert stage_json(run, "20-compile")["attempt"] == 1
    assert stage_json(run, "30-numerics")["attempt"] == 2
    assert stage_json(run, "40-bench")["attempt"] == 2


def test_only_unknown_stage_is_a_usage_error(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    cli(p, "run", "--candidate", "cand")
    code, out = cli(p, "run", "--only", "compiel")
    assert code == 4
    assert "did you mean" in out or "compiel" in out


def test_a_a_run_keeps_separate_role_folders(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", f"{JUNIT} {{out_file}} t1=passed t2=passed"))
    p.stage(
        "20-compile.toml",
        """
        name = "compile"
        [[check]]
        kind = "tests"
        name = "ops"
        run = "{py} %s {out_file} t1=passed t2=passed"
    """
        % (HELPERS / "write_junit.py"),
    )
    code, _ = cli(p, "run", "--candidate", "pinned")
    run = p.run_dirs()[0]
    check = run / "20-compile" / "ops"
    assert (check / "pinned" / "junit.xml").is_file() and (check / "candidate" / "junit.xml").is_file()
    roles = run_json(run)["roles"]
    assert roles["pinned"]["arm"] == roles["candidate"]["arm"] == "pinned"
    assert stage_json(run, "20-compile")["verdict"] == "PASS"
    assert "A/A run" in (run / "report.html").read_text()
    assert code == 3


# How long `slow` sleeps is read from a file beside the plan, so that a resume runs the plan
# the run recorded and only the sleep changes.
SLOW = """
name = "numerics"
[[check]]
kind = "command"
name = "quick"
run = "{py} -c 'print(1)'"
[[check]]
kind = "command"
name = "slow"
run = "sh -c 'echo $$ > %s; sleep $(cat %s)'"
"""


def slow_stage(p: Project, marker: Path, seconds: int) -> None:
    sleep = p.root / "sleep-seconds"
    sleep.write_text(str(seconds))
    p.stage("30-numerics.toml", SLOW.replace("{py}", PY) % (marker, sleep))


def start_background(p: Project, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "qualify", *args, "--project", str(p.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def pid_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def running_with(text: str) -> list[int]:
    """Live processes (not zombies) whose command line holds `text`. A checked command runs in
    a PID namespace of its own, so the pid it writes is not this host's: it is found by what it
    ran instead (the slow command's shell names its marker file)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmdline and pid_state(int(entry.name)) not in (None, "Z"):
            found.append(int(entry.name))
    return found


def test_ctrl_c_stops_cleanly_and_resume_finishes(project: Callable[..., Project]) -> None:
    p = project()
    marker = p.root / "slow.pid"
    p.stage("20-compile.toml", command_stage("compile", "true"))
    slow_stage(p, marker, 300)
    proc = start_background(p, "run", "--candidate", "cand")
    wait_for(marker)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert running_with(str(marker)) == []  # the child's group was killed
    run = p.run_dirs()[0]
    assert run_json(run)["status"] == "interrupted"
    assert stage_json(run, "30-numerics")["status"] == "interrupted"
    assert "qualify run --run" in out

    # Resume: the finished stage is kept, the interrupted one is redone (now quick).
    marker.unlink()
    slow_stage(p, marker, 0)
    result = qualify_proc("run", "--run", run.name, "--project", str(p.root))
    assert result.returncode == 3, result.stdout + result.stderr
    assert stage_json(run, "20-compile")["attempt"] == 1
    assert stage_json(run, "30-numerics")["status"] == "complete"
    assert stage_json(run, "30-numerics")["attempt"] == 2
    assert run_json(run)["status"] == "complete"


def test_resume_after_a_killed_run_reuses_finished_checks(project: Callable[..., Project]) -> None:
    """SIGKILL leaves no chance to clean up: the lock must free itself and the resume must
    keep the checks that had finished (inputs unchanged) and redo the one that had not."""
    p = project()
    marker = p.root / "slow.pid"
    slow_stage(p, marker, 300)
    proc = start_background(p, "run", "--candidate", "cand")
    wait_for(marker)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    # An orphan of the killed run, ours to clean where its watcher did not yet: its group is
    # led by the containment's wrapper, not by the command itself. It is found by its command
    # line: the pid it wrote is its PID namespace's, and a group of 0 would be this test's own.
    for orphan in running_with(str(marker)):
        with contextlib.suppress(ProcessLookupError):
            group = os.getpgid(orphan)
            if group not in (0, os.getpgrp()):
                os.killpg(group, signal.SIGKILL)
            os.kill(orphan, signal.SIGKILL)
    run = p.run_dirs()[0]
    assert run_json(run)["status"] == "running"
    quick_result = json.loads((run / "30-numerics" / "quick" / "result.json").read_text())

    marker.unlink()
    slow_stage(p, marker, 0)
    result = qualify_proc("run", "--run", run.name, "--project", str(p.root))
    assert result.returncode == 3, result.stdout + result.stderr
    assert "kept from the interrupted attempt" in result.stdout
    numerics = stage_json(run, "30-numerics")
    assert numerics["status"] == "complete" and numerics["verdict"] == "PASS"
    reused = json.loads((run / "30-numerics" / "quick" / "result.json").read_text())
    assert reused["started_at"] == quick_result["started_at"]
    assert (run / "30-numerics" / "attempts" / "1" / "quick" / "result.json").is_file()


def test_reference_role_needs_a_reference_arm(project: Callable[..., Project]) -> None:
    p = project()
    p.stage(
        "30-numerics.toml",
        """
        [[check]]
        kind = "command"
        name = "ref"
        roles = ["reference", "pinned", "candidate"]
        run = "true"
    """,
    )
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 4
    assert "measure the reference role, but no reference arm is defined" in out


def test_reference_role_gets_its_own_folder(project: Callable[..., Project]) -> None:
    p = project(
        DEFAULT := """
[arms.pinned]
installable = ".#default"
[arms.cand]
installable = ".#cand"
[arms.reference]
installable = ".#reference"
"""
    )
    p.stage(
        "30-numerics.toml",
        """
        [[check]]
        kind = "command"
        name = "ref"
        roles = ["reference", "pinned", "candidate"]
        run = "sh -c 'echo {arm} > {dir}/arm.txt'"
    """,
    )
    cli(p, "run", "--candidate", "cand")
    check = p.run_dirs()[0] / "30-numerics" / "ref"
    assert (check / "reference" / "arm.txt").read_text().strip() == "reference"
    assert (check / "candidate" / "arm.txt").read_text().strip() == "cand"
    assert DEFAULT


def test_secrets_never_reach_the_run_directory(project: Callable[..., Project]) -> None:
    p = project("""
inherit_env = ["PATH"]
[arms.pinned]
installable = ".#default"
env = { HF_TOKEN = "hf_arm_secret_1234" }
[arms.cand]
installable = ".#cand"
env = { HF_TOKEN = "hf_arm_secret_1234" }
""")
    p.stage(
        "20-compile.toml",
        """
        [[check]]
        kind = "command"
        name = "c"
        env = { DB_PASSWORD = "pw_check_secret_99" }
        run = "sh -c 'test ${#HF_TOKEN} = 18 && test ${#DB_PASSWORD} = 18'"
    """,
    )
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 3, out  # the child did get both secrets
    run = p.run_dirs()[0]
    for path in run.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "hf_arm_secret_1234" not in text, path
            assert "pw_check_secret_99" not in text, path
    assert "<redacted>" in (run / "run.json").read_text()


def test_rerun_records_new_build_options(project: Callable[..., Project]) -> None:
    p = project()
    p.stage("20-compile.toml", command_stage("compile", "true"))
    cli(p, "run", "--candidate", "cand")
    run = p.run_dirs()[0]
    assert run_json(run)["options"] == {"allow_dirty": False, "override_inputs": [], "nix_options": []}
    cli(
        p,
        "run",
        "--only",
        "compile",
        "--force",
        "--allow-dirty",
        "--override-input",
        "nixpkgs=path:/x",
        "--nix-option",
        "max-jobs=0",
    )
    options = run_json(run)["options"]
    assert options["allow_dirty"] is True and options["override_inputs"] == [["nixpkgs", "path:/x"]]
    assert options["nix_options"] == [["max-jobs", "0"]]
    code, out = cli(p, "run", "--only", "compile", "--override-input", "broken")
    assert code == 4 and "expected NAME=FLAKEREF" in out
    code, out = cli(p, "run", "--only", "compile", "--nix-option", "max-jobs")
    assert code == 4 and "expected NAME=VALUE" in out


def test_a_run_narrowed_by_stage_never_qualifies_and_keeps_its_narrowing(
    project: Callable[..., Project],
) -> None:
    """`--stage` runs only the stages named. Here they are every stage of the default order,
    all passing: the plan's own extra stage (`energy`) is left out, so the run is INCOMPLETE,
    never QUALIFIED, and says what it left out; resumed, it still runs only those; a stage the
    plan lacks is refused before anything runs. Before: no option narrowed a run."""
    p = project()
    six_stages(p)
    p.stage("65-energy.toml", command_stage("energy", "true"))
    default = ("build", "compile", "numerics", "serving", "soak", "bench", "distribution")
    narrowed = [arg for name in default for arg in ("--stage", name)]
    code, out = cli(p, "run", "--candidate", "cand", *narrowed)
    assert code == 3, out
    [run] = p.run_dirs()
    saved = run_json(run)
    assert saved["verdict"] == "INCOMPLETE" and saved["options"]["left_out"] == ["energy"], saved["options"]
    assert not list(run.glob("*-energy")) and "energy left out" in out, out
    code, out = cli(p, "run", "--run", run.name, "--force")
    assert code == 3 and not list(run.glob("*-energy")), out
    assert run_json(run)["options"]["stages"] == list(default)
    code, out = cli(p, "run", "--candidate", "cand", "--stage", "compiel")
    assert code == 4 and "compiel" in out and len(p.run_dirs()) == 1, out
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 0, out  # the whole plan, the extra stage with it, qualifies
