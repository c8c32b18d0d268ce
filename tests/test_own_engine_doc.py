"""docs/own-engine.md, the walkthrough of an engine of one's own, is linked where a newcomer
starts (the README's "On your own project"), names examples/c-kernels as its worked example,
and runs what the end-to-end test of that example runs: the files it copies are the test's,
every qualify command it shows exists with its options, every file it links is there."""

from __future__ import annotations

import re
import shlex

import typer
from conftest import REPO
from test_engine_end_to_end import SOURCES

from qualify.cli import app

DOC = REPO / "docs" / "own-engine.md"


def own_project_section() -> str:
    readme = (REPO / "README.md").read_text()
    start = readme.index("## On your own project")
    return readme[start : readme.index("\n## ", start + 1)]


def test_the_readme_s_own_project_section_points_at_the_walkthrough_and_the_nearest_example() -> None:
    section = own_project_section()
    assert "](docs/own-engine.md)" in section
    assert "](examples/c-kernels)" in section and "nearest example" in section


def test_every_link_of_the_walkthrough_is_there() -> None:
    links = re.findall(r"\]\(([^)#]+)\)", DOC.read_text())
    assert "../examples/c-kernels" in links and "../examples/ci/github-actions.yml" in links
    for link in links:
        assert (DOC.parent / link).exists(), link


def test_the_walkthrough_copies_what_the_end_to_end_test_copies() -> None:
    copied = re.search(r"cp -r examples/c-kernels/\{([^}]*)\}", DOC.read_text())
    assert copied is not None and tuple(copied[1].split(",")) == SOURCES


def test_every_qualify_command_of_the_walkthrough_exists_with_its_options() -> None:
    group = typer.main.get_command(app)
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), flags=re.S)
    commands = [
        shlex.split(part.strip(), comments=True)
        for block in blocks
        for line in block.splitlines()
        for part in line.split("&&")
        if part.strip().startswith("qualify ")
    ]
    assert {c[1] for c in commands} >= {"init", "doctor", "plan", "run", "merge", "comment"}
    for words in commands:
        command = group.commands[words[1]]  # type: ignore[attr-defined]
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert all(w in options for w in words[2:] if w.startswith("-")), words
