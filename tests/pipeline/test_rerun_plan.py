"""A rerun or a resume runs the plan the run was made with: a plan whose files differ (a bench
margin committed since, a limit edited and not committed) is refused before anything runs,
naming the files; --allow-dirty reruns under it, and the stage and the report say so."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import PY, Project, command_stage
from typer.testing import CliRunner

from qualify.cli import app
from qualify.pipeline.planfiles import PlanChange, PlanFiles, digest_of
from qualify.records import seal

HELPERS = Path(__file__).resolve().parent.parent / "helpers"
runner = CliRunner()

#: The candidate is 10 % slower than pinned: a 5 % margin fails it, a 15 % one passes it.
ARMS = """
[arms.pinned]
installable = ".#default"
vars = { samples = "speed:higher:99,100,101,100,99,101" }
[arms.cand]
installable = ".#cand"
vars = { samples = "speed:higher:89,90,91,90,89,91" }
"""
BENCH = "stages/60-bench.toml"


def cli(project: Project, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, [*args, "--project", str(project.root)])
    return result.exit_code, result.output


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def bench_stage(margin: float) -> str:
    run = f"{PY} {HELPERS / 'emit_metrics.py'} {{out_file}} {{samples}}"
    return command_stage("bench", run, metrics="true", limits=f"{{ speed_margin = {margin} }}")


def made(project: Callable[..., Project], *, in_git: bool = True, arms: str = ARMS) -> Project:
    """Every stage of the default order, bench judged by a margin; committed to a git checkout."""
    p = project(arms)
    for index, name in enumerate(("build", "compile", "numerics", "serving", "soak"), start=1):
        p.stage(f"{index}0-{name}.toml", command_stage(name, "true"))
    p.stage("60-bench.toml", bench_stage(0.05))
    # Declared, so that a rerun of the bench alone leaves no later stage blocked by its first verdict.
    p.stage("70-distribution.toml", 'name = "distribution"\nnot_applicable = "nothing published"\n')
    if in_git:
        (p.root / ".gitignore").write_text("runs/\n")
        git(p.root, "init", "-q")
        git(p.root, "add", "-A")
        git(p.root, "commit", "-qm", "plan")
    return p


def first_run(p: Project) -> Path:
    code, out = cli(p, "run", "--candidate", "cand")
    assert code == 1, out  # bench fails its 5 % margin
    [run] = p.run_dirs()
    return run


def read(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def stage(run: Path, folder: str = "60-bench") -> dict[str, Any]:
    return read(run / folder / "stage.json")


def plan_on_disk(p: Project) -> dict[str, str]:
    """The project's plan files by name, each with its sha256, read here."""
    paths = [p.root / "qualify.toml", *(p.root / "stages").glob("*.toml")]
    return {str(path.relative_to(p.root)): hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def widen_margin(p: Project) -> None:
    p.stage("60-bench.toml", bench_stage(0.15))


def test_a_new_run_records_its_plan_files_and_each_stage_the_plan_it_ran_under(
    project: Callable[..., Project],
) -> None:
    p = made(project)
    run = first_run(p)
    recorded = read(run / "run.json")["plan_files"]
    assert recorded["files"] == plan_on_disk(p) and recorded["digest"] == digest_of(recorded["files"])
    head = git(p.root, "rev-parse", "HEAD")
    for folder in ("10-build", "60-bench"):
        ran = stage(run, folder)["ran_under"]
        assert ran == {
            "plan_digest": recorded["digest"],
            "revision": head,
            "dirty": False,
            "plan_changes": [],
        }


def test_a_committed_change_to_a_stage_file_is_refused_naming_it(project: Callable[..., Project]) -> None:
    p = made(project)
    run = first_run(p)
    made_at = git(p.root, "rev-parse", "HEAD")
    before = read(run / "run.json")
    widen_margin(p)
    git(p.root, "commit", "-qam", "a wider bench margin")
    code, out = cli(p, "run", "--only", "bench")
    assert code == 4, out
    assert f"run {run.name}" in out and f"git {made_at[:12]}" in out
    assert f"{BENCH} changed (committed)" in out
    assert f"git checkout {made_at[:12]} -- {BENCH}" in out and "--allow-dirty" in out
    # Refused before anything ran or was written.
    assert stage(run)["attempt"] == 1 and stage(run)["verdict"] == "FAIL"
    assert not (run / "60-bench" / "attempts").exists()
    assert read(run / "run.json") == before


@pytest.mark.parametrize(
    "selection", [("--only", "bench"), ("--from", "numerics"), ()], ids=["only", "from", "resume"]
)
def test_an_uncommitted_edit_is_refused_for_a_rerun_and_a_resume(
    project: Callable[..., Project], selection: tuple[str, ...]
) -> None:
    p = made(project)
    run = first_run(p)
    widen_margin(p)
    code, out = cli(p, "run", "--run", run.name, *selection)
    assert code == 4, out
    assert f"{BENCH} changed (uncommitted)" in out
    assert stage(run)["attempt"] == 1


def test_a_changed_plan_outside_git_is_refused_too(project: Callable[..., Project]) -> None:
    p = made(project, in_git=False)
    run = first_run(p)
    (p.root / "stages" / "70-extra.toml").write_text(command_stage("extra", "true"))
    (p.root / "stages" / "50-soak.toml").unlink()
    code, out = cli(p, "run", "--only", "bench")
    assert code == 4, out
    assert "stages/50-soak.toml removed; stages/70-extra.toml added" in out
    assert "put the plan's files back as they were when the run was made" in out
    assert stage(run, "50-soak")["attempt"] == 1


def test_allow_dirty_reruns_under_the_changed_plan_and_every_report_says_so(
    project: Callable[..., Project],
) -> None:
    p = made(project)
    run = first_run(p)
    made_at = git(p.root, "rev-parse", "HEAD")
    recorded = read(run / "run.json")["plan_files"]
    widen_margin(p)
    git(p.root, "commit", "-qam", "a wider bench margin")
    now = git(p.root, "rev-parse", "HEAD")
    code, out = cli(p, "run", "--only", "bench", "--allow-dirty")
    assert code == 0, out
    bench = stage(run)
    assert bench["verdict"] == "PASS" and bench["attempt"] == 2
    ran = bench["ran_under"]
    assert ran["plan_changes"] == [f"{BENCH} changed"]
    assert ran["revision"] == now and ran["dirty"] is False
    assert ran["plan_digest"] != recorded["digest"]
    # What the run was made with stays as it was recorded; a stage not rerun keeps its own.
    saved = read(run / "run.json")
    assert saved["plan_files"] == recorded and saved["provenance"]["git"]["rev"] == made_at
    assert stage(run, "20-compile")["ran_under"]["plan_changes"] == []

    summary = (run / "summary.md").read_text()
    assert "QUALIFIED** — bench run under a changed plan" in summary
    assert "| bench | **PASS** (changed plan) |" in summary
    assert (
        f"source git {made_at[:12]}; bench ran under a changed plan, plan {ran['plan_digest'][:12]}"
        in summary
    )
    assert f"at git {now[:12]}" in summary
    assert (
        f"Stage bench ran under a plan that differs from the one the run was made with ({BENCH} changed)"
        in (summary)
    )
    html = (run / "report.html").read_text()
    assert "ran under a changed plan" in html and f"not the plan of git {made_at[:12]}" in html
    report = read(run / "report.json")
    [shown] = [s for s in report["stages"] if s["name"] == "bench"]
    assert shown["plan_changes"] == [f"{BENCH} changed"] and shown["revision"] == now
    [kept] = [s for s in report["stages"] if s["name"] == "compile"]
    assert kept["plan_changes"] == [] and kept["plan_digest"] == recorded["digest"]
    assert "changed plan" not in kept["why"]

    # The plan the run recorded, put back: a rerun needs no --allow-dirty, and the mark goes.
    git(p.root, "checkout", "-q", made_at, "--", BENCH)
    code, out = cli(p, "run", "--only", "bench")
    assert code == 1, out  # the 5 % margin fails the candidate again
    assert stage(run)["ran_under"]["plan_changes"] == []
    assert "changed plan" not in (run / "summary.md").read_text()


def test_an_unchanged_plan_reruns_as_before(project: Callable[..., Project]) -> None:
    p = made(project)
    run = first_run(p)
    recorded = read(run / "run.json")["plan_files"]
    (p.root / "notes.txt").write_text("not part of the plan\n")  # an untracked file elsewhere
    code, out = cli(p, "run", "--only", "bench")
    assert code == 1, out
    assert stage(run)["attempt"] == 2
    assert (
        stage(run)["ran_under"]["plan_changes"] == []
        and stage(run)["ran_under"]["plan_digest"] == (recorded["digest"])
    )
    code, out = cli(p, "run", "--run", run.name, "--from", "soak", "--force")
    assert code == 1, out
    assert stage(run, "50-soak")["attempt"] == 2 and stage(run)["attempt"] == 3
    assert "changed plan" not in (run / "summary.md").read_text()
    assert "the plan the run was made with" in (run / "report.html").read_text()


@pytest.mark.slow
def test_a_run_set_reruns_its_recorded_plan_and_names_each_member_rerun_under_another(
    project: Callable[..., Project],
) -> None:
    second = '[arms.cand2]\ninstallable = ".#cand2"\nvars = { samples = "speed:higher:89,90,91,90,89,91" }\n'
    p = made(project, arms=ARMS + second)
    code, out = cli(p, "run", "--candidate", "cand", "--candidate", "cand2")
    assert code == 1, out
    [run] = p.run_dirs()
    widen_margin(p)
    code, out = cli(p, "run", "--only", "bench", "--candidate", "cand2")
    assert code == 4 and f"run {run.name}" in out and f"{BENCH} changed (uncommitted)" in out, out
    code, out = cli(p, "run", "--only", "bench", "--allow-dirty")
    assert code == 0, out
    for member in ("cand", "cand2"):
        assert stage(run / member)["ran_under"]["plan_changes"] == [f"{BENCH} changed"]
    first = (run / "summary.md").read_text().splitlines()[0]
    said = "cand: bench run under a changed plan; cand2: bench run under a changed plan"
    assert first.endswith(f"{said}; distribution not applicable: nothing published"), first


def as_recorded_before_plan_files(run: Path) -> None:
    """The run as a qualify that kept no plan files wrote it: version 2 records without
    `plan_files` and `ran_under`, sealed as qualify seals what it writes."""
    for path in [run / "run.json", *run.glob("*/stage.json"), *run.glob("*/*/result.json")]:
        document = read(path)
        document.pop("plan_files", None)
        document.pop("ran_under", None)
        path.write_text(json.dumps({**document, "schema_version": 2}, indent=2))
        seal.note(path)


def test_a_run_recorded_before_plan_files_shows_and_reruns(project: Callable[..., Project]) -> None:
    p = made(project)
    run = first_run(p)
    as_recorded_before_plan_files(run)
    code, out = cli(p, "show", run.name)
    assert code == 0 and "NOT QUALIFIED — bench failed" in out, out
    code, out = cli(p, "report", run.name)
    assert code == 0 and (run / "report.html").is_file(), out
    assert "changed plan" not in (run / "summary.md").read_text()
    # Nothing to compare with: the rerun goes on, and the stage records its plan, changes unknown.
    widen_margin(p)
    code, out = cli(p, "run", "--only", "bench")
    assert code == 0, out
    ran = stage(run)["ran_under"]
    assert ran["plan_changes"] is None and ran["plan_digest"] == digest_of(plan_on_disk(p))
    assert "plan_files" not in read(run / "run.json")
    summary = (run / "summary.md").read_text()
    assert "Stage bench ran under plan" in summary and "recorded no plan to compare it with" in summary


def test_plan_changes_name_each_file_once_in_order() -> None:
    recorded = {"qualify.toml": "a", "stages/20-compile.toml": "b", "stages/60-bench.toml": "c"}
    now = PlanFiles({"stages/60-bench.toml": "C", "qualify.toml": "a", "stages/70-extra.toml": "d"})
    assert now.changes_from(recorded) == [
        PlanChange("stages/20-compile.toml", "removed"),
        PlanChange("stages/60-bench.toml", "changed"),
        PlanChange("stages/70-extra.toml", "added"),
    ]
    assert PlanFiles(dict(recorded)).changes_from(recorded) == []
    assert digest_of(recorded) == digest_of(dict(reversed(list(recorded.items()))))
    assert digest_of(recorded) != digest_of({**recorded, "stages/60-bench.toml": "C"})
