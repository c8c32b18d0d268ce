"""A bench shared by several candidates: each one's units read as a bench of one.

The order of the units is `qualify.core.designs`' (ABBA for one candidate, Williams for more); a
candidate's pairs are (pinned's unit, its unit) of each block: the same pinned units serve every
candidate, measured once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from qualify.core.designs import block_order

__all__ = ["block_order", "candidate_view", "complete_pairs"]


def candidate_view(units: Iterable[Mapping[str, Any]], role: str) -> list[dict[str, Any]]:
    """The units of pinned and `role`, with `role` named "candidate": what one candidate's
    judgement reads from a schedule shared by several."""
    out = []
    for unit in units:
        if unit.get("role") == "pinned":
            out.append(dict(unit))
        elif unit.get("role") == role:
            renamed = dict(unit, role="candidate")
            output = renamed.get("output")
            if isinstance(output, str) and output.startswith(f"{role}/"):
                renamed["output"] = "candidate/" + output[len(role) + 1 :]
            out.append(renamed)
    return out


def complete_pairs(units: Iterable[Mapping[str, Any]], roles: Sequence[str]) -> int:
    """Blocks in which every one of `roles` ran a unit that finished."""
    done: dict[int, set[str]] = {}
    for unit in units:
        if unit.get("phase") == "pair" and unit.get("ok"):
            done.setdefault(int(unit["pair"]), set()).add(str(unit["role"]))
    return sum(1 for got in done.values() if set(roles) <= got)
