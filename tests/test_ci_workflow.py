"""The example CI workflow parses, and every qualify command it runs exists with its options."""

from __future__ import annotations

import shlex

import typer
import yaml
from conftest import REPO

from qualify.cli import app


def qualify_commands() -> list[list[str]]:
    workflow = yaml.safe_load((REPO / "examples" / "ci" / "github-actions.yml").read_text())
    found = []
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            for line in str(step.get("run", "")).splitlines():
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
