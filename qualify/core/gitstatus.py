"""What a git working tree holds beyond its commit, read the way nix reads it.

A flake of a git checkout is built from its tracked files as they are in the working tree: a
change to a tracked file (staged or not) changes what nix builds, an untracked file is not in
the flake's source at all. So only tracked changes make a tree "dirty"; untracked files are
listed, for a reader who wonders, and never counted.

`git status --porcelain=v2 -z` is read, not v1: v1 starts an unstaged change's line with a
space, which a reader that trims its output loses, cutting the first path by one letter; v2's
lines start with their kind, and `-z` keeps a path with spaces, quotes or a line break whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qualify.core.process import capture

#: The most paths of each kind kept (a tree may hold thousands of untracked build files).
LISTED = 20


@dataclass(frozen=True)
class TreeChanges:
    """Paths relative to the checkout's root: tracked files changed, and untracked ones."""

    changed: tuple[str, ...]
    untracked: tuple[str, ...]
    changed_count: int
    untracked_count: int

    @property
    def dirty(self) -> bool:
        return self.changed_count > 0


def tree_changes(root: Path, *, timeout_s: float = 30) -> TreeChanges | None:
    """The working tree's changes, or None where `root` is not in a git checkout (or git is
    missing)."""
    argv = ["git", "-C", str(root), "status", "--porcelain=v2", "-z", "--untracked-files=normal"]
    code, text = capture(argv, timeout_s=timeout_s)
    if code != 0:
        return None
    return parse_status(text)


def parse_status(text: str) -> TreeChanges:
    """`git status --porcelain=v2 -z` output as the changes it lists."""
    changed: list[str] = []
    untracked: list[str] = []
    entries = iter(text.split("\0"))
    for entry in entries:
        kind = entry[:2]
        if kind == "1 ":
            changed.append(entry.split(" ", 8)[8])
        elif kind == "2 ":
            changed.append(entry.split(" ", 9)[9])
            next(entries, None)  # the path it was renamed or copied from
        elif kind == "u ":
            changed.append(entry.split(" ", 10)[10])
        elif kind == "? ":
            untracked.append(entry[2:])
    return TreeChanges(tuple(changed[:LISTED]), tuple(untracked[:LISTED]), len(changed), len(untracked))


def listed(paths: tuple[str, ...], count: int) -> str:
    """'a, b and 3 more' for an error or a report line."""
    more = count - len(paths)
    return ", ".join(paths) + (f" and {more} more" if more > 0 else "")


def uncommitted(root: Path, paths: Sequence[str], *, timeout_s: float = 30) -> set[str] | None:
    """Which of `paths` (relative to `root`) differ from the checkout's HEAD in the working
    tree: changed, removed, or new and untracked. None where `root` is not in a git checkout."""
    if not paths:
        return set()
    diff = ["git", "-C", str(root), "diff", "--name-only", "-z", "--relative", "HEAD", "--", *paths]
    code, changed = capture(diff, timeout_s=timeout_s)
    if code != 0:
        return None
    others = ["git", "-C", str(root), "ls-files", "--others", "-z", "--", *paths]
    code, untracked = capture(others, timeout_s=timeout_s)
    if code != 0:
        return None
    return {p for p in (changed + "\0" + untracked).split("\0") if p}
