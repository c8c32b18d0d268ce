"""`[series.NAME]` in qualify.toml: what a bisect walks, from the known-good end to the known-bad
one (docs/bisect.md). Two kinds:

- `arms = [...]`: an ordered list of arms, each step a run of that arm against the first;
- `input = "NAME"`: the revisions of one flake input, each step the candidate arm built with
  that input overridden at the revision (`revisions = [...]`, or `from` and `to` read from the
  input's git history when the bisect starts).

Both are checked as qualify.toml is read, so a series that cannot be walked is refused naming
the file, the line and the key before any step is built. What needs more than the file (the
flake.lock, the input's repository) is checked by the bisect before it starts
(`qualify.bisect.inputseries`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from qualify.core.tomlfile import Table, suggest

#: The fewest steps a series holds: its two ends.
MIN_STEPS = 2

ARM_KEYS = ("arms",)
INPUT_KEYS = ("input", "url", "revisions", "from", "to", "candidate")

#: A full git commit hash: nix takes nothing shorter for a `rev`, and a short one may grow
#: ambiguous as the repository does.
FULL_REV = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class InputSeries:
    """`[series.NAME]` with `input`: the revisions of one flake input, as the file gives them."""

    input: str
    #: The flake reference the revisions are of, without a rev; None: the input's own locked
    #: URL from flake.lock.
    url: str | None
    #: Listed, oldest (the good end) first; empty when `span` is given instead.
    revisions: tuple[str, ...]
    #: `from` and `to`, read from the input's git history when the bisect starts.
    span: tuple[str, str] | None
    #: The arm built with the override; None: qualify.toml's `candidate`.
    candidate: str | None


def load_series(table: Table, arms: Mapping[str, object]) -> dict[str, tuple[str, ...]]:
    """Every `[series.NAME]` of arms: at least two, each an `[arms.*]` arm named once. The
    series of an input are checked here too (`load_input_series` returns them)."""
    found = _read(table, arms)
    return {name: one for name, one in found.items() if isinstance(one, tuple)}


def load_input_series(table: Table, arms: Mapping[str, object]) -> dict[str, InputSeries]:
    """Every `[series.NAME]` of a flake input's revisions."""
    found = _read(table, arms)
    return {name: one for name, one in found.items() if isinstance(one, InputSeries)}


def _read(table: Table, arms: Mapping[str, object]) -> dict[str, tuple[str, ...] | InputSeries]:
    found: dict[str, tuple[str, ...] | InputSeries] = {}
    for name in table.data:
        one = table.table(name)
        one.reject_unknown([*ARM_KEYS, *INPUT_KEYS])
        if "arms" in one.data and "input" in one.data:
            raise one.error(
                None,
                f"series {name!r} has both `arms` and `input`",
                "keep one: `arms` for a series of arms, `input` (with `revisions`, or `from` and "
                "`to`) for the revisions of one flake input",
            )
        if "input" in one.data:
            found[name] = _input_series(one, name, arms)
            continue
        if "arms" not in one.data:
            raise one.error(
                None,
                f"series {name!r} has no arms",
                'list them, known-good end first: arms = ["pinned", "step1", "candidate"], or '
                'walk the revisions of a flake input: input = "nixpkgs" with revisions = [...]',
            )
        stray = sorted(set(one.data) - set(ARM_KEYS))
        if stray:
            raise one.error(stray[0], "belongs to a series of an input's revisions, not of arms", "remove it")
        found[name] = _arm_series(one, arms)
    return found


def _arm_series(one: Table, arms: Mapping[str, object]) -> tuple[str, ...]:
    listed = one.strings("arms")
    if len(listed) < MIN_STEPS:
        raise one.error(
            "arms",
            f"lists {len(listed)} arm(s); a series needs at least {MIN_STEPS}, its known-good "
            "and known-bad ends",
            "add the arm that passes first and the one that fails last",
        )
    for index, arm in enumerate(listed):
        if arm not in arms:
            raise one.doc.error(
                (*one.key("arms"), index),
                f"names no arm {arm!r}{suggest(arm, arms)}",
                "arms defined: " + ", ".join(sorted(arms)),
            )
        if listed.index(arm) != index:
            raise one.doc.error(
                (*one.key("arms"), index),
                f"names the arm {arm!r} twice",
                "list each arm of the series once, in order",
            )
    return listed


def _input_series(one: Table, name: str, arms: Mapping[str, object]) -> InputSeries:
    flake_input = one.string("input") or ""
    if not flake_input:
        raise one.error("input", "is empty", 'name an input of the project\'s flake: input = "nixpkgs"')
    url = one.string("url")
    if url is not None and not url:
        raise one.error("url", "is empty", "leave it out to use the input's own URL from flake.lock")
    candidate = one.string("candidate")
    if candidate is not None and candidate not in arms:
        raise one.error(
            "candidate",
            f"names no arm {candidate!r}{suggest(candidate, arms)}",
            "arms defined: " + ", ".join(sorted(arms)),
        )
    span_keys = [key for key in ("from", "to") if key in one.data]
    if "revisions" in one.data and span_keys:
        raise one.error(
            span_keys[0],
            "is given with `revisions`",
            "keep one: `revisions` listed, or `from` and `to` read from the input's git history",
        )
    if "revisions" in one.data:
        return InputSeries(flake_input, url, _revisions(one), None, candidate)
    if len(span_keys) != len(("from", "to")):
        missing = "to" if span_keys == ["from"] else "from"
        raise one.error(
            None if not span_keys else missing,
            f"series {name!r} of input {flake_input!r} has no "
            + ("revisions" if not span_keys else f"`{missing}`"),
            'list them, good end first: revisions = ["<rev>", ...], or give both `from = "<rev>"` '
            'and `to = "<rev>"` to read them from the input\'s git history',
        )
    ends = (one.string("from") or "", one.string("to") or "")
    for key, rev in zip(("from", "to"), ends, strict=True):
        if not rev or rev.startswith("-"):
            raise one.error(key, f"{rev!r} is not a revision", "give a commit hash (or a tag or branch)")
    return InputSeries(flake_input, url, (), ends, candidate)


def _revisions(one: Table) -> tuple[str, ...]:
    listed = one.strings("revisions")
    if len(listed) < MIN_STEPS:
        raise one.error(
            "revisions",
            f"lists {len(listed)} revision(s); a series needs at least {MIN_STEPS}, its known-good "
            "and known-bad ends",
            "add the revision that passes first and the one that fails last",
        )
    for index, rev in enumerate(listed):
        if not FULL_REV.fullmatch(rev):
            raise one.doc.error(
                (*one.key("revisions"), index),
                f"{rev!r} is not a full commit hash (40 hex digits, lower case)",
                f"`git rev-parse {rev}` in the input's repository prints it",
            )
        if listed.index(rev) != index:
            raise one.doc.error(
                (*one.key("revisions"), index),
                f"names the revision {rev!r} twice",
                "list each revision of the series once, oldest first",
            )
    return listed
