"""Labels: the names that become folders inside a run folder.

A run set names each member's run folder by its label (`runs/<id>/<label>/`) and each role
folder of what the set measured once (`<NN-stage>/<check>/<label>/`); a fleet report names each
host's copy by its key (`hosts/<key>/`). A label is therefore a path component qualify writes
to and reads from, and the reports link to it: it must be one plain name that stays inside the
folder, and it must not be the name of anything else that lives beside it.

A safe name is letters, digits, `.`, `_` and `-`, not starting with `.` or `-` (so never `.`,
`..`, a hidden file or something read as an option), at most `MAX_LENGTH` characters. A label is
a safe name that is also none of the names a run folder already uses (`RESERVED`, compared without
case: a case-insensitive file system makes `Pinned` the role folder `pinned`) and does not look
like a stage folder (`10-build`: a stage file's stem).

Labels are checked where they are made (the members of a new run set, from qualify.toml's arms)
and again wherever a saved run.json is read back (`check_saved_labels`), since a run folder can
come from an archive someone else made.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from qualify.core.errors import RUN_FOLDER_HINT, RunStoreError

MAX_LENGTH = 64

_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
#: A stage's folder is its stage file's stem, which starts with its order: `10-build`, `20_compile`.
_STAGE_FOLDER = re.compile(r"[0-9]+[-_].*")

#: What a run folder, a check folder and a fleet folder already hold, besides members' folders.
RESERVED = frozenset(
    {
        # role folders of a check, and the noise floor's rerun of pinned
        "pinned",
        "candidate",
        "reference",
        "pinned.2",
        # folders
        "attempts",
        "gcroots",
        "hosts",
        "logs",
        "output",
        # files of a run, stage and check folder
        "lock",
        "run.json",
        "stage.json",
        "result.json",
        "report.html",
        "report.json",
        "summary.md",
        "junit.xml",
        "processes.jsonl",
        "seal.json",
    }
)


def name_problem(name: str) -> str | None:
    """Why `name` is not a safe folder name, or None when it is one."""
    if not name:
        return "it is empty"
    if len(name) > MAX_LENGTH:
        return f"it is {len(name)} characters long, more than {MAX_LENGTH}"
    if name[0] in ".-":
        return f"it starts with {name[0]!r}"
    if not _SAFE.fullmatch(name):
        bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))})
        return "it holds " + " ".join(repr(c) for c in bad) + " (allowed: letters, digits, . _ -)"
    return None


def label_problem(label: str) -> str | None:
    """Why `label` cannot name a member's folder, or None when it can."""
    problem = name_problem(label)
    if problem is not None:
        return problem
    if label.lower() in RESERVED:
        return f"a run folder already holds {label.lower()!r}"
    if _STAGE_FOLDER.fullmatch(label):
        return "it looks like a stage folder (a stage file's stem, such as 10-build)"
    return None


def duplicate(names: Iterable[str]) -> str | None:
    """The first name given twice (without case: one folder on a case-insensitive disk)."""
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            return name
        seen.add(name.lower())
    return None


@dataclass(frozen=True)
class SavedLabels:
    """The names a saved run.json gives folders inside the run, each checked when it is read
    (`check_saved_labels`): a set's members' labels, a member's own label in its set, a fleet's
    host keys. A plain dataclass checked by hand: every command that opens a run reads it, and
    it must not cost them the import of a validation library."""

    kind: str
    #: A run set's members' labels, in their order.
    members: tuple[str, ...] = ()
    #: A member's label in its set (`set.label`); None for a run that is no set's member.
    set_label: str | None = None
    #: A fleet's host keys, in their order.
    hosts: tuple[str, ...] = ()


def check_saved_labels(document: Mapping[str, Any], where: str) -> SavedLabels:
    """The labels of a saved run.json (`where` names it), refused when one could lead outside
    its folder.

    A set's members, a member's own `set` entry and a fleet's hosts name folders; each must be
    a label (a fleet's host keys a safe name) and unique, whatever wrote the file.
    """
    hint = RUN_FOLDER_HINT
    kind = document.get("kind", "run")
    if not isinstance(kind, str):
        raise RunStoreError(f"{where}: kind is {type(kind).__name__}, not a string", hint)
    labels = SavedLabels(kind)
    if kind == "set":
        members = [
            _label_at(m, "label", where, "a member's label", label_problem)
            for m in _entries(document, "members", where, "a list of members")
        ]
        if (twice := duplicate(members)) is not None:
            raise RunStoreError(f"{where}: two members are labelled {twice!r}", hint)
        labels = replace(labels, members=tuple(members))
    if "set" in document:
        entry = document["set"]
        if not isinstance(entry, Mapping):
            raise RunStoreError(f"{where}: 'set' is not an object", hint)
        own = _label_at(entry, "label", where, "its label in the set", label_problem)
        labels = replace(labels, set_label=own)
    if kind == "fleet":
        hosts = [
            _label_at(h, "key", where, "a host's key", name_problem)
            for h in _entries(document, "hosts", where, "a list of hosts")
        ]
        if (twice := duplicate(hosts)) is not None:
            raise RunStoreError(f"{where}: two hosts are named {twice!r}", hint)
        labels = replace(labels, hosts=tuple(hosts))
    return labels


def _entries(document: Mapping[str, Any], key: str, where: str, what: str) -> list[Mapping[str, Any]]:
    """The list of objects at `key`, refused (naming `key`) when it is not one."""
    value = document.get(key)
    if not isinstance(value, list) or not all(isinstance(e, Mapping) for e in value):
        raise RunStoreError(
            f"{where}: {key!r} is not {what}",
            RUN_FOLDER_HINT,
        )
    return value


def _label_at(
    entry: Mapping[str, Any], key: str, where: str, what: str, rule: Callable[[str], str | None]
) -> str:
    value = entry.get(key)
    if not isinstance(value, str):
        raise RunStoreError(
            f"{where}: {what} is {value!r}, not a name", "a run folder from qualify names every member"
        )
    problem = rule(value)
    if problem is not None:
        # The value is shown with repr(): a hostile label is quoted, never taken as markup.
        raise RunStoreError(
            f"{where}: {what} {value!r} cannot name a folder: {problem}",
            "this run folder was not written by qualify as it is; nothing was read or written "
            "through that name",
        )
    return value
