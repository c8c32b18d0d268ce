"""`[remedies.NAME]` in qualify.toml: variants of the candidate's code generation that
`qualify remedy` tries on the source files whose kernels failed the compile stage
(docs/remedy.md).

    [remedies.true16-off]
    installable = ".#remedy-true16-off"   # an attribute set: one derivation per source file
    flags = "-Xclang -target-feature -Xclang -real-true16"   # what it changes, as the report says it

Each attribute of the installable is a derivation that compiles one source file of the
candidate with the variant's flags; it names the file in its `source_file` attribute (the
name the compiler writes into the library's symbol table), and its output holds the code
object(s). Checked as qualify.toml is read, so a variant that cannot be built is refused naming
the file, the line and the key before anything is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qualify.core.tomlfile import Table

KEYS = ("installable", "flags", "candidate")
#: A variant's name goes into folder names and attribute paths.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


@dataclass(frozen=True)
class RemedySpec:
    """One `[remedies.NAME]`."""

    name: str
    installable: str
    #: What the variant changes, as the reviewer reads it (never passed to anything).
    flags: str
    #: The arm whose failures it remedies; None: the run's candidate, whichever it is.
    candidate: str | None


def load_remedies(table: Table, arms: set[str] | frozenset[str]) -> dict[str, RemedySpec]:
    found: dict[str, RemedySpec] = {}
    for name in table.data:
        if not _NAME.fullmatch(name):
            raise table.error(
                name,
                f"remedy name {name!r} is not a plain name",
                "use letters, digits, '.', '_', '+' and '-', starting with a letter or digit",
            )
        one = table.table(name)
        one.reject_unknown(KEYS)
        installable = one.string("installable", required=True)
        assert installable is not None  # required
        if "#" not in installable:
            raise one.error(
                "installable",
                f"{installable!r} names no attribute",
                'write it as a flake reference with an attribute, e.g. ".#remedy-true16-off"',
            )
        candidate = one.string("candidate")
        if candidate is not None and candidate not in arms:
            raise one.error(
                "candidate", f"names no arm {candidate!r}", "arms defined: " + ", ".join(sorted(arms))
            )
        found[name] = RemedySpec(name, installable, one.string("flags", "") or "", candidate)
    return found
