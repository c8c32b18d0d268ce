"""The README's install lines ("On your own project") work from the folder each one names.

Before, `pip install './qualify[stages]'` was given "from a checkout of qualify": from the root of
a checkout `./qualify` is the package folder, not a project, and pip refused it.

Each `pip install` (on a line of the section's shell block, or in its comment) runs as pip's dry
run that neither downloads nor installs anything (`--dry-run --no-deps --no-build-isolation
--no-index`: pip reads the project's metadata through this venv's hatchling), in the folder the
line's comment names: "in the root of a checkout" runs in this checkout's root; "anywhere" runs in
a folder of its own, with `/path/to/qualify` meaning this checkout. The git URL's host is a
placeholder (`https://…`): this checkout, as `git+file://localhost/…` at its HEAD, stands in for
it, since no remote can be reached here and the tag need not exist in this clone. A `nix run`
line's installable must be a folder holding flake.nix (running it would build the flake from
nixpkgs, which cannot be fetched here). Each `NIX_CONFIG` line, read by bash, must give nix what
`qualify doctor` requires of it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO

from qualify.doctor import ENABLE_FLAKES, nix_features

README = REPO / "README.md"


def section(text: str, title: str = "On your own project") -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


@dataclass(frozen=True)
class Install:
    line: int  # in README.md
    command: str  # the command as written
    folder: str  # "root" (of a checkout) or "anywhere"


def install_lines(text: str) -> list[Install]:
    """Every `pip install` and `nix run` of the section's shell blocks, with the folder named by
    its line's comment."""
    body = section(text)
    first = text[: text.index(body)].count("\n") + 1
    found: list[Install] = []
    in_block = False
    for number, line in enumerate(body.splitlines(), first):
        if line.startswith("```"):
            in_block = line.strip() == "```sh"
            continue
        if not in_block or not re.search(r"\b(pip install|nix run)\b", line):
            continue
        comment = line.partition("#")[2]
        # "in the root of a checkout", or "from a checkout" where a reader stands in its root.
        folder = "anywhere" if "anywhere" in comment else "root" if "checkout" in comment else ""
        for command in re.findall(r"(?:pip install|nix run) (?:'[^']*'|[^\s)]+)", line):
            found.append(Install(number, command, folder))
    return found


INSTALLS = install_lines(README.read_text(encoding="utf-8"))


def test_the_section_has_install_lines_for_both_folders() -> None:
    folders = {i.folder for i in INSTALLS if i.command.startswith("pip install")}
    assert folders == {"root", "anywhere"}, INSTALLS


def _spec(command: str, tmp: Path) -> str:
    spec = command.removeprefix("pip install ").strip("'")
    spec = spec.replace("/path/to/qualify", str(REPO))
    if "git+" in spec:
        if not (REPO / ".git").exists():
            pytest.skip("this copy of qualify is no git checkout: its git URL line cannot stand in")
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        spec = re.sub(r"git\+https://\S*?@\S+$", f"git+file://localhost{REPO}@{head}", spec)
    return spec


@pytest.mark.parametrize("install", INSTALLS, ids=lambda i: f"line{i.line}-{i.command}")
def test_each_install_line_works_in_the_folder_it_names(install: Install, tmp_path: Path) -> None:
    assert install.folder, f"README.md:{install.line}: its comment says no folder to run it in"
    cwd = REPO if install.folder == "root" else tmp_path
    if install.command.startswith("nix run"):
        ref = install.command.removeprefix("nix run ").strip("'").split("#")[0]
        assert (cwd / ref / "flake.nix").is_file(), f"README.md:{install.line}: {ref} has no flake.nix"
        return
    spec = _spec(install.command, tmp_path)
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*pip, "--no-index", "--disable-pip-version-check", spec],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 0, f"README.md:{install.line}: `{install.command}` in {cwd}:\n{said}"
    assert "Would install qualify-" in done.stdout, said
    assert "does not provide the extra" not in said, said  # `[stages]` is an extra qualify has


def nix_configs(text: str) -> list[str]:
    """The NIX_CONFIG values the section exports, as bash reads its `$'…'` quoting."""
    values = []
    # An inline one may be wrapped between `export` and its value.
    for quoted in re.findall(r"export\s+NIX_CONFIG=(\$'[^']*')", section(text)):
        done = subprocess.run(
            ["bash", "-c", f'export NIX_CONFIG={quoted}; printf %s "$NIX_CONFIG"'],
            capture_output=True,
            text=True,
            check=True,
        )
        values.append(done.stdout)
    return values


def test_the_readme_names_the_nix_settings_doctor_requires() -> None:
    setting = re.search(r"`(experimental-features = [^`]+)`", ENABLE_FLAKES)
    assert setting is not None
    text = section(README.read_text(encoding="utf-8"))
    assert setting.group(1) in text
    configs = nix_configs(README.read_text(encoding="utf-8"))
    assert configs and all(setting.group(1) in c.splitlines() for c in configs), configs


@pytest.mark.nix
@pytest.mark.skipif(
    shutil.which("nix") is None, reason="needs nix, to check what the NIX_CONFIG lines enable"
)
def test_each_nix_config_line_enables_what_a_run_needs() -> None:
    for config in nix_configs(README.read_text(encoding="utf-8")):
        ok, detail = nix_features({**os.environ, "NIX_CONFIG": config})
        assert ok, f"NIX_CONFIG={config!r}: {detail}"
