"""The example CI workflow, checked as the scripts it runs: every qualify command it runs exists
with its options; qualify is installed from a folder of the checkout or a pip URL after
setup-python; nix is on PATH with flakes enabled for every later step (its step run by bash here,
with real nix); shown.json is written before the upload that keeps it; and a pull request from a
fork never reaches a self-hosted GPU runner.

What stands in for GitHub's runner: bash with `GITHUB_PATH`/`GITHUB_ENV` files, read back as the
runner reads them (one folder a line; `NAME<<DELIMITER` blocks), and a small evaluator of the
`if:` expressions the workflow uses (`==`, `!=`, `&&`, `||`, contexts, quoted strings).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import venv
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from conftest import REPO

from qualify.cli import app

WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"


def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def step(job: str, name_starts: str) -> dict[str, Any]:
    return next(s for s in workflow()["jobs"][job]["steps"] if str(s.get("name", "")).startswith(name_starts))


def position(job: str, predicate: Any) -> int:
    return next(i for i, s in enumerate(workflow()["jobs"][job]["steps"]) if predicate(s))


def qualify_commands() -> list[list[str]]:
    found = []
    for job in workflow()["jobs"].values():
        for s in job["steps"]:
            for line in str(s.get("run", "")).splitlines():
                words = shlex.split(line.split(">")[0].split("&&")[0])
                if words[:1] == ["qualify"]:
                    found.append(words[1:])
    return found


def test_every_qualify_command_of_the_workflow_exists() -> None:
    group = typer.main.get_command(app)
    commands = qualify_commands()
    assert {c[0] for c in commands} >= {"doctor", "run", "show", "merge"}
    for words in commands:
        command = group.commands[words[0]]  # type: ignore[attr-defined]
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for word in words[1:]:
            if word.startswith("-"):
                assert word in options, f"qualify {words[0]} has no option {word}"


def test_every_script_is_valid_bash() -> None:
    for job in workflow()["jobs"].values():
        for s in job["steps"]:
            if "run" in s:
                done = subprocess.run(["bash", "-n"], input=s["run"], text=True, capture_output=True)
                assert done.returncode == 0, (s.get("name"), done.stderr)


def test_python_then_qualify_then_what_uses_it() -> None:
    """Before: `pip install --user qualify` (no index has it) and no setup-python."""
    for job in ("qualify", "fleet"):
        python = position(job, lambda s: str(s.get("uses", "")).startswith("actions/setup-python@"))
        install = position(job, lambda s: str(s.get("name", "")).startswith("Install qualify"))
        first_use = position(
            job, lambda s: any(x.startswith("qualify ") for x in str(s.get("run", "")).split("\n"))
        )
        assert python < install < first_use, job
        script = step(job, "Install qualify")["run"]
        assert "pip install --user" not in script and "QUALIFY_SOURCE" in script
        assert 'echo "$RUNNER_TEMP/qualify/bin" >> "$GITHUB_PATH"' in script
    assert "[stages]" in step("qualify", "Install qualify")["run"]
    assert "[stages]" in step("fleet", "Install qualify")["run"]  # merging re-judges every host
    assert "QUALIFY_SOURCE" in workflow()["env"]
    nix = position("qualify", lambda s: str(s.get("name", "")).startswith("Nix"))
    assert nix < position("qualify", lambda s: "qualify doctor" in str(s.get("run", "")))


def test_shown_json_is_written_before_the_upload_that_keeps_it() -> None:
    """Before: `qualify show --json > shown.json` came after the upload step."""
    jobs = workflow()["jobs"]["qualify"]["steps"]
    shown = position("qualify", lambda s: "> shown.json" in str(s.get("run", "")))
    upload = position("qualify", lambda s: str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert shown < upload
    kept = jobs[upload]["with"]["path"].split()
    assert {"shown.json", "outcome.json", "runs/"} <= set(kept)
    assert jobs[upload]["if"] == "always()" and jobs[shown]["if"] == "always()"


# -- `if:` expressions ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<op>==|!=|&&|\|\||\(|\))|'(?P<str>[^']*)'|(?P<name>[A-Za-z_][\w.-]*(?:\(\))?))"
)


def evaluate(expression: str, contexts: dict[str, Any]) -> bool:
    """The workflow's `if:` expressions, as GitHub evaluates them (the operators they use)."""
    python: list[str] = []
    position_ = 0
    while position_ < len(expression.rstrip()):
        match = _TOKEN.match(expression, position_)
        assert match, f"cannot read {expression[position_:]!r}"
        position_ = match.end()
        if match["op"]:
            python.append({"&&": "and", "||": "or"}.get(match["op"], match["op"]))
        elif match["str"] is not None:
            python.append(repr(match["str"]))
        else:
            value: Any = contexts
            for part in match["name"].split("."):
                value = value.get(part) if isinstance(value, dict) else None
            python.append(repr(value))
    return bool(eval(" ".join(python), {"__builtins__": {}}))


def contexts(event: str, head_repo: str | None = None) -> dict[str, Any]:
    pull = {"head": {"repo": {"full_name": head_repo}}} if head_repo else None
    return {
        "github": {"event_name": event, "repository": "engine/llama", "event": {"pull_request": pull}},
        "always()": True,
    }


def test_a_fork_s_pull_request_never_reaches_a_self_hosted_runner() -> None:
    """Before: every pull request ran on the self-hosted GPU runners, a fork's too."""
    jobs = workflow()["jobs"]
    self_hosted = [name for name, job in jobs.items() if "self-hosted" in str(job["runs-on"])]
    assert self_hosted == ["qualify"]
    for name in self_hosted:
        condition = jobs[name]["if"]
        assert not evaluate(condition, contexts("pull_request", "someone/llama-fork"))
        assert evaluate(condition, contexts("pull_request", "engine/llama"))  # a branch of this repository
        assert evaluate(condition, contexts("workflow_dispatch"))
    assert workflow()["permissions"] == {"contents": "read"}
    checkout = next(
        s for s in jobs["qualify"]["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")
    )
    assert checkout["with"]["persist-credentials"] is False


def test_the_evaluator_reads_what_it_is_given() -> None:
    assert evaluate("github.event_name == 'push'", contexts("push"))
    assert not evaluate("github.event_name != 'push' && github.repository == 'x'", contexts("pull_request"))


# -- the scripts, run ----------------------------------------------------------------------------


def runner_files(tmp_path: Path) -> tuple[Path, Path]:
    path, env = tmp_path / "github_path", tmp_path / "github_env"
    path.write_text("")
    env.write_text("")
    return path, env


def read_github_env(file: Path) -> dict[str, str]:
    """`NAME=value` lines and `NAME<<DELIMITER` blocks, as the runner reads $GITHUB_ENV."""
    values: dict[str, str] = {}
    lines = iter(file.read_text().splitlines())
    for line in lines:
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            values[name] = "\n".join(block)
        elif "=" in line:
            name, value = line.split("=", 1)
            values[name] = value
    return values


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
