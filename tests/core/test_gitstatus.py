"""Dirty means what nix would build differently: tracked files changed in the working tree.
Untracked files are not in a flake's source; they are listed, never called dirty.

Before: provenance counted an untracked file (the CI example's outcome.json) as a dirty tree,
though the run was not refused for it; and the refusal of a tracked change cut the first file's
name by one letter ("lake.nix" for "flake.nix": the status line's leading space was trimmed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qualify.core import provenance
from qualify.core.config import load_config
from qualify.core.errors import UsageError
from qualify.core.gitstatus import parse_status, tree_changes
from qualify.pipeline.preflight import require_clean_tree


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=q", "-c", "user.email=q@example.org", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "engine"
    root.mkdir()
    (root / "flake.nix").write_text("{ outputs = { self }: { }; }\n")
    (root / "qualify.toml").write_text('[arms.pinned]\ninstallable = ".#default"\n')
    (root / "a file with spaces.c").write_text("int x;\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "engine")
    return root


def test_an_untracked_file_is_listed_not_dirty_and_not_refused(checkout: Path) -> None:
    (checkout / "outcome.json").write_text("{}")
    recorded = provenance.git(checkout)
    assert recorded["dirty"] is False
    assert recorded["untracked"] == ["outcome.json"] and recorded["untracked_count"] == 1
    require_clean_tree(load_config(checkout), allow_dirty=False)  # not refused


def test_an_unstaged_change_is_refused_naming_the_whole_file(checkout: Path) -> None:
    (checkout / "flake.nix").write_text("{ outputs = { self }: { x = 1; }; }\n")
    (checkout / "a file with spaces.c").write_text("int y;\n")
    assert provenance.git(checkout)["dirty"] is True
    with pytest.raises(UsageError) as caught:
        require_clean_tree(load_config(checkout), allow_dirty=False)
    message = caught.value.message
    assert "(a file with spaces.c, flake.nix)" in message or "(flake.nix, a file with spaces.c)" in message
    require_clean_tree(load_config(checkout), allow_dirty=True)


def test_a_staged_rename_counts_once_by_its_new_name(checkout: Path) -> None:
    git(checkout, "mv", "a file with spaces.c", "renamed.c")
    changes = tree_changes(checkout)
    assert changes is not None and changes.changed == ("renamed.c",) and changes.dirty


def test_outside_a_checkout_nothing_is_known(tmp_path: Path) -> None:
    assert tree_changes(tmp_path) is None
    assert provenance.git(tmp_path)["dirty"] is None


def test_the_lists_are_bounded_and_counted() -> None:
    text = "".join(f"? build/obj{i}.o\0" for i in range(50))
    changes = parse_status(text)
    assert len(changes.untracked) == 20 and changes.untracked_count == 50 and not changes.dirty
