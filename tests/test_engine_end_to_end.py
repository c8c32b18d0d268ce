"""A maintainer's whole path on an engine that is not ggml and has no server, from its own
repository to a comment on its pull request: the c-kernels example (examples/c-kernels: five C
kernels, a metrics bench, unit tests; gcc 12 and clang 19 arms and a slow -O0 negative control),
through real nix, compilers and qualify.

1. The engine's sources alone, committed, built once (`nix build`), then `qualify init`: it
   finds plain ELF with no GPU code and no ggml kernel, and writes the kernel check with
   host_patterns guessed from the build's functions, naming the parameter in a comment.
2. The maintainer's edits (the example's qualify.toml and stages/: the arms, the controls, the
   engine's own numerics and bench, serving and soak declared not applicable), committed.
3. `qualify doctor` and `qualify plan` say the plan can qualify and show what does not apply.
4. The CI example's jobs step by step (tests/helpers/actions_runner.py): the qualify job's
   shell steps for real, `qualify run` with the project's candidate and controls included; the
   fleet job's merge of the packed run; the comment job posting the fleet summary.
5. What a reviewer reads: QUALIFIED with the stages that do not apply named in every first line
   (console, report.json, report.html, summary.md as GitHub's Markdown renders it, junit.xml,
   the fleet's summary and the pull request's comment).

What stands in: GitHub's runner for the `uses:` steps (checkout is the project folder itself,
setup-python this interpreter, upload/download-artifact folders) and GitHub's REST API for the
comment (a local server: github.com cannot be reached from here). Everything else is real.
A few minutes on a 2-core machine: two pip installs of qualify, and the run set's bench.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from example_arms import EXAMPLE_MARKS, example_env
from helpers.actions_runner import Artifacts, JobRunner
from helpers.github_stand_in import GitHub, Serving
from markdown_it import MarkdownIt
from nixflakes import git
from test_ci_workflow import REPOSITORY, TOKEN, WORKFLOW, base_env, contexts, setup_python

from qualify.pipeline.plan import load_plan

pytestmark = [
    *EXAMPLE_MARKS,
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("gcc-12") is None or shutil.which("clang-19") is None or shutil.which("nix") is None,
        reason="the engine's arms need nix and the host's gcc-12 and clang-19",
    ),
]

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "c-kernels"
SOURCES = ("src", "build.sh", "flake.nix", ".gitignore")
NOTE = "serving, soak not applicable: the engine has no server; distribution not applicable: nothing of it is published: each host builds it from its sources"
LINE = f"QUALIFIED — {NOTE}"


def qualify(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qualify", *args],
        cwd=project,
        env={**example_env(), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def commit(project: Path, message: str) -> None:
    git(project, "add", "-A")
    git(project, "commit", "-qm", message)


@pytest.fixture(scope="module")
def built_engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The engine's repository before qualify: its sources, committed, and built once."""
    project = tmp_path_factory.mktemp("e2e") / "c-kernels"
    project.mkdir()
    for name in SOURCES:
        source = EXAMPLE / name
        if source.is_dir():
            shutil.copytree(source, project / name)
        else:
            shutil.copy2(source, project / name)
    git(project, "init", "-q")
    commit(project, "c-kernels")
    built = subprocess.run(
        ["nix", "build", f"{project}#default", "--no-link", "--json"],
        env=example_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return project


def test_from_the_engine_s_repository_to_a_comment_on_its_pull_request(
    built_engine: Path, tmp_path: Path
) -> None:
    # 1. init fits the kernel check to what the build holds, and says so.
    done = qualify(built_engine, "init")
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "the flake's default package" in said, said
    written = (built_engine / "stages" / "20-compile.toml").read_text()
    comment = written[written.index("# `qualify init` looked") : written.index('kind = "kernel-resources"')]
    assert "Edit host_patterns" in comment, written  # the parameter to edit, named above the check
    [check] = [
        c for c in load_plan(built_engine / "stages").stage("compile").checks if c.kind == "kernel-resources"
    ]
    assert check.params["host_patterns"] == ["ck_*"], check.params

    # 2. The maintainer's edits: the example holds what they end with; its kernel check keeps
    #    what init guessed.
    shutil.rmtree(built_engine / "stages")
    shutil.copytree(EXAMPLE / "stages", built_engine / "stages")
    shutil.copy2(EXAMPLE / "qualify.toml", built_engine / "qualify.toml")
    [edited] = [
        c for c in load_plan(built_engine / "stages").stage("compile").checks if c.kind == "kernel-resources"
    ]
    assert edited.params["host_patterns"] == check.params["host_patterns"]
    commit(built_engine, "qualify")

    # 3. doctor and plan: the plan can qualify, and what does not apply is shown with its reason.
    doctor = qualify(built_engine, "doctor", "-C", ".")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "can qualify" in doctor.stdout and "never" not in doctor.stdout
    plan = qualify(built_engine, "plan")
    assert "serving  NOT APPLICABLE: the engine has no server" in plan.stdout, plan.stdout
    assert "never qualifies" not in plan.stdout

    # 4. The CI example's jobs, as the runner runs them.
    artifacts = Artifacts(tmp_path / "artifacts")
    stand_ins = {"actions/checkout": lambda call: None, "actions/setup-python": setup_python(tmp_path / "py")}
    stand_ins |= artifacts.stand_ins()
    env = {**base_env(), "NIX_CONFIG": example_env()["NIX_CONFIG"]}
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        ctx = contexts()
        ctx["github"]["api_url"] = github.url
        job = JobRunner(
            WORKFLOW,
            "qualify",
            ctx,
            workspace=built_engine,
            temp=tmp_path / "gpu",
            env=env,
            actions=stand_ins,
        )
        job.run()
        steps = [(r.name, r.returncode, r.output[-2000:]) for r in job.runs]
        assert job.status == "success", steps
        outcome = json.loads((Path(job.env["QUALIFY_OUT"]) / "outcome.json").read_text())
        assert outcome["verdict_line"] == LINE and outcome["exit_code"] == 0, outcome
        assert "QUALIFIED" in job.step("Qualify").output and NOTE in job.step("Qualify").output
        status = subprocess.run(
            ["git", "-C", str(built_engine), "status", "--porcelain", "--ignored"],
            capture_output=True,
            text=True,
        )
        assert status.stdout == "", status.stdout  # nothing written into the checkout

        [run] = [p for p in Path(job.env["QUALIFY_RUNS_DIR"]).iterdir() if (p / "run.json").is_file()]
        reviewer_reads(run, job.env, built_engine)

        fleet = JobRunner(
            WORKFLOW,
            "fleet",
            ctx,
            workspace=built_engine,
            temp=tmp_path / "fleet",
            env=env,
            actions=stand_ins,
        )
        fleet.contexts["needs"] = {"qualify": {"result": "success"}}
        fleet.run()
        assert fleet.status == "success", [(r.name, r.output[-2000:]) for r in fleet.runs]
        summary = (tmp_path / "artifacts" / "qualify-fleet" / "fleet" / "summary.md").read_text()
        assert NOTE in first_heading(summary) and "QUALIFIED" in first_heading(summary), summary[:600]

        ctx["needs"] = {"fleet": {"result": fleet.status, "outputs": fleet.outputs()}}
        (tmp_path / "empty").mkdir()
        comment = JobRunner(
            WORKFLOW,
            "comment",
            ctx,
            workspace=tmp_path / "empty",
            temp=tmp_path / "c",
            env=env,
            actions=stand_ins,
        )
        comment.run()
        assert comment.status == "success", [(r.name, r.output[-2000:]) for r in comment.runs]
        [posted] = github.on(7)
        assert NOTE in first_heading(posted["body"]) and TOKEN not in posted["body"]


def reviewer_reads(run: Path, env: dict[str, str], project: Path) -> None:
    """5. Every first line of the run set's outputs says QUALIFIED and what did not apply."""
    assert json.loads((run / "report.json").read_text())["verdict_line"] == LINE
    assert NOTE in (run / "report.html").read_text()
    heading = first_heading((run / "summary.md").read_text())
    assert heading.startswith("Toolchain qualification: QUALIFIED") and NOTE in heading, heading
    root = ET.parse(run / "junit.xml").getroot()
    assert root.get("failures") == "0" and root.get("errors") == "0"
    [verdict] = [c for s in root.iter("testsuite") if s.get("name") == "qualify" for c in s.iter("testcase")]
    assert list(verdict) == []  # passed
    members = json.loads((run / "run.json").read_text())["members"]
    assert {m["label"] for m in members} == {"clang19", "positive-pinned", "negative-slow"}
    for label in ("clang19", "positive-pinned"):
        assert json.loads((run / label / "report.json").read_text())["verdict_line"] == LINE
    shown = subprocess.run(
        [sys.executable, "-m", "qualify", "show", "-C", str(project), "--runs-dir", env["QUALIFY_RUNS_DIR"]],
        env={**example_env(), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=False,
    )
    first = shown.stdout.splitlines()[0] if shown.stdout else ""
    assert "QUALIFIED" in first and NOTE in first, shown.stdout + shown.stderr


def first_heading(markdown: str) -> str:
    """The first heading's text as GitHub's Markdown renders it (CommonMark with tables)."""
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(markdown)
    index = next(i for i, t in enumerate(tokens) if t.type == "heading_open")
    return "".join(c.content for c in tokens[index + 1].children or [])
