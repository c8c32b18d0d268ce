"""`[series.NAME]` in qualify.toml: an ordered list of arms a bisect walks, from the known-good
end (its first arm) to the known-bad one (its last), docs/bisect.md."""

from __future__ import annotations

from collections.abc import Mapping

from qualify.core.tomlfile import Table, suggest

#: The fewest arms a series holds: its two ends (`qualify.bisect.search.MIN_STEPS`).
MIN_ARMS = 2


def load_series(table: Table, arms: Mapping[str, object]) -> dict[str, tuple[str, ...]]:
    """Every `[series.NAME]`: `arms`, at least two, each an `[arms.*]` arm named once.

    Checked as qualify.toml is read, so a bisect over a series that cannot be walked is refused
    naming the file, the line and the key before any step is built.
    """
    found: dict[str, tuple[str, ...]] = {}
    for name in table.data:
        one = table.table(name)
        one.reject_unknown(["arms"])
        if "arms" not in one.data:
            raise one.error(
                None,
                f"series {name!r} has no arms",
                'list them, known-good end first: arms = ["pinned", "step1", "candidate"]',
            )
        listed = one.strings("arms")
        if len(listed) < MIN_ARMS:
            raise one.error(
                "arms",
                f"lists {len(listed)} arm(s); a series needs at least {MIN_ARMS}, its known-good "
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
        found[name] = listed
    return found
