"""qualify.toml's `candidate` and `profile`: what `qualify run` qualifies, and with which profile,
when the command line names neither, so that one CI workflow runs unchanged on any project.

Before, neither key existed: `qualify run` without `--candidate` stopped at "which arm is the
candidate?" (exit 4), and a workflow had to hard-code an arm and a profile that most projects
do not have. Runs here are real `qualify run` processes on a plan of `command` checks (no build
stage, so no nix).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Project, command_stage, qualify_proc

from qualify.core.config import load_config
from qualify.core.errors import ConfigError

ARMS = """
[arms.pinned]
installable = ".#default"
[arms.rocm10]
installable = ".#rocm10"
[arms.rocm11]
installable = ".#rocm11"
"""

# A stage whose `quick` profile runs another command, so the run's log says which one ran.
STAGE = command_stage("compile", "echo plan-as-written") + (
    "[profiles.quick.check.compile-check]\nrun = 'echo profile-quick'\n"
    "[profiles.full.check.compile-check]\nrun = 'echo profile-full'\n"
)


def made(project: Callable[..., Project], top: str) -> Project:
    p = project(top + ARMS)
    p.stage("20-compile.toml", STAGE)
    return p


def saved(p: Project) -> dict[str, object]:
    [run] = p.run_dirs()
    document: dict[str, object] = json.loads((run / "run.json").read_text())
    return document


def test_the_file_s_candidate_and_profile_serve_a_run_that_names_none(
    project: Callable[..., Project],
) -> None:
    p = made(project, 'candidate = "rocm10"\nprofile = "quick"\n')
    done = qualify_proc("run", "-C", str(p.root))
    assert done.returncode == 3, done.stderr  # INCOMPLETE: the plan has one stage of six
    run = saved(p)
    assert run["roles"]["candidate"]["arm"] == "rocm10"  # type: ignore[index]
    assert run["profile"] == "quick"
    [invocation] = run["invocations"]  # type: ignore[misc]
    assert invocation["candidates"] == ["rocm10"] and invocation["profile"] == "quick"
    assert "profile-quick" in done.stdout + done.stderr


def test_the_command_line_wins_over_the_file(project: Callable[..., Project]) -> None:
    p = made(project, 'candidate = "rocm10"\nprofile = "quick"\n')
    done = qualify_proc("run", "-C", str(p.root), "--candidate", "rocm11", "--profile", "full")
    assert done.returncode == 3, done.stderr
    run = saved(p)
    assert run["roles"]["candidate"]["arm"] == "rocm11"  # type: ignore[index]
    assert run["profile"] == "full"


def test_a_list_of_candidates_is_one_run_set(project: Callable[..., Project]) -> None:
    p = made(project, 'candidate = ["rocm10", "rocm11"]\n')
    done = qualify_proc("run", "-C", str(p.root))
    assert done.returncode == 3, done.stderr
    run = saved(p)
    assert run["kind"] == "set"
    assert [m["arm"] for m in run["members"]] == ["rocm10", "rocm11"]  # type: ignore[attr-defined]
    assert run["profile"] is None


def test_a_profile_the_plan_does_not_define_names_the_file_s_key(project: Callable[..., Project]) -> None:
    p = made(project, 'candidate = "rocm10"\nprofile = "quik"\n')
    done = qualify_proc("run", "-C", str(p.root))
    assert done.returncode == 4
    assert f"{p.root / 'qualify.toml'}:3: profile: names no profile 'quik'" in done.stderr
    assert 'did you mean "quick"' in done.stderr and "profiles: full, quick" in done.stderr
    assert not p.runs.exists() or not p.run_dirs()  # refused before a run folder is made
    # Given on the command line, the same mistake is the command line's.
    done = qualify_proc("run", "-C", str(p.root), "--profile", "fulll")
    assert done.returncode == 4 and "defines no profile 'fulll'" in done.stderr
    assert "qualify.toml:3" not in done.stderr


def test_without_a_candidate_anywhere_the_error_says_where_to_set_one(
    project: Callable[..., Project],
) -> None:
    p = made(project, "")
    done = qualify_proc("run", "-C", str(p.root))
    assert done.returncode == 4 and "which arm is the candidate?" in done.stderr
    assert 'or set candidate = "ARM" in qualify.toml' in done.stderr
    assert "rocm10, rocm11" in done.stderr


@pytest.mark.parametrize(
    ("top", "expected"),
    [
        (
            'candidate = "rocn10"',
            r"qualify.toml:1: candidate: names no arm 'rocn10' \(did you mean \"rocm10\"\?\)",
        ),
        ('candidate = ["rocm10", "rcom11"]', r"qualify.toml:1: candidate\[1\]: names no arm 'rcom11'"),
        ('candidate = "pinned"', r"candidate: 'pinned' is the pinned arm"),
        ('candidate = ["rocm10", "rocm10"]', r"candidate: names an arm twice"),
        ("candidate = []", r"candidate: names no arm"),
        ("candidate = 10", r"candidate: expected an arm's name or a list of them, got a number"),
        ('profile = ""', r"profile: is empty"),
        ("profile = 1", r"profile: expected a string"),
    ],
)
def test_a_wrong_candidate_or_profile_is_refused_at_load(tmp_path: Path, top: str, expected: str) -> None:
    (tmp_path / "qualify.toml").write_text(top + "\n" + ARMS)
    with pytest.raises(ConfigError, match=expected) as refused:
        load_config(tmp_path)
    assert str(tmp_path / "qualify.toml") in refused.value.message


def test_a_resumed_run_keeps_its_own_candidate(project: Callable[..., Project]) -> None:
    p = made(project, 'candidate = "rocm10"\n')
    assert qualify_proc("run", "-C", str(p.root)).returncode == 3
    config = p.root / "qualify.toml"
    config.write_text(config.read_text().replace('candidate = "rocm10"', 'candidate = "rocm11"'))
    [run] = p.run_dirs()
    # qualify.toml is part of the plan the run recorded: resuming under its change is refused...
    done = qualify_proc("run", "-C", str(p.root), "--run", run.name, "--force")
    assert done.returncode == 4 and "qualify.toml changed" in done.stderr, done.stderr
    # ...unless --allow-dirty, and the candidate stays the one the run recorded.
    done = qualify_proc("run", "-C", str(p.root), "--run", run.name, "--force", "--allow-dirty")
    assert done.returncode == 3, done.stderr
    assert saved(p)["roles"]["candidate"]["arm"] == "rocm10"  # type: ignore[index]
