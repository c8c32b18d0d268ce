"""What a failing kernel does, in a reviewer's words ("spill more", "lose occupancy"), read
from the reasons `qualify.compile.diff` gave it, and the order failures are read in."""

from __future__ import annotations

import re

from qualify.compile.diff import KernelDiff

#: What a FAIL reason says a kernel does, in the order a reviewer should read them (the worst
#: for the running engine first): (reason's first words, words after "N kernels").
FAILURE_KINDS: tuple[tuple[str, str], ...] = (
    ("VGPR spills", "spill more"),
    ("spill stores", "spill more"),
    ("spill loads", "spill more"),
    ("matrix instructions", "lose their matrix instructions"),
    ("scratch loads+stores", "gain scratch loads and stores"),
    ("scratch", "use more scratch memory"),
    ("stack frame", "use a larger stack frame"),
    ("local memory", "use more local memory"),
    ("occupancy", "lose occupancy"),
    ("wave size", "change wave size"),
    ("dynamic stack", "newly use a dynamic stack"),
    ("LDS", "exceed 64 KiB of LDS"),
    ("stub in the candidate", "are stubs in the candidate (real code in pinned)"),
    ("missing from the candidate", "are missing from the candidate"),
)


def failure_kinds(result: KernelDiff) -> list[str]:
    """The kinds of failure (`FAILURE_KINDS`' words) a FAIL kernel's reasons name, in that order.
    A kernel that fails for its spills may also have gained occupancy (an INFO reason that starts
    the same way): only a drop counts as losing it."""
    kinds = set()
    for r in result.reasons:
        # The longest start a reason has decides ("scratch loads+stores" before "scratch").
        starts = [(start, words) for start, words in FAILURE_KINDS if r.startswith(start)]
        if not starts:
            continue
        start, words = max(starts, key=lambda sw: len(sw[0]))
        if start == "occupancy" and not _dropped(r):
            continue
        if start == "matrix instructions" and not r.endswith("(lost)"):
            continue
        kinds.add(words)
    return [words for words in dict.fromkeys(w for _, w in FAILURE_KINDS) if words in kinds]


def _dropped(reason: str) -> bool:
    figures = re.match(r"occupancy (\d+) → (\d+)", reason)
    return figures is None or int(figures[2]) < int(figures[1])


def failure_rank(result: KernelDiff) -> int:
    """Where a FAIL kernel sorts among the failures: by the worst kind it shows."""
    order = list(dict.fromkeys(w for _, w in FAILURE_KINDS))
    kinds = failure_kinds(result)
    return order.index(kinds[0]) if kinds else len(order)
