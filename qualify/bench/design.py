"""The order of a bench's units when pinned is compared with one or more candidates.

Each block ("pair" in the saved schedule: one unit of every role) runs the roles in one row of
a Williams design: a Latin square in which every role runs once in every position and follows
every other role equally often (for an odd number of roles, the square and its mirror). Two
roles give ABBA; with more, every candidate runs before pinned as often as after it and no role
always follows the same one, so a drift (heat, caches) or a carry-over from the unit before
falls on every candidate alike.

A candidate's pairs are (pinned's unit, its unit) of each block: the same pinned units serve
every candidate, measured once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def williams_rows(count: int) -> list[list[int]]:
    """The rows of a Williams design for `count` treatments (0 .. count-1)."""
    if count < 2:
        raise ValueError("a Williams design needs at least two treatments")
    first = [0]
    low, high = 1, count - 1
    while len(first) < count:
        first.append(low)
        low += 1
        if len(first) < count:
            first.append(high)
            high -= 1
    rows = [[(x + i) % count for x in first] for i in range(count)]
    if count % 2:
        rows += [row[::-1] for row in rows]
    return rows


def block_order(roles: Sequence[str], block: int) -> list[str]:
    """The order of `roles` in block `block` (1-based): row (block - 1) of the design, cycling."""
    rows = williams_rows(len(roles))
    return [roles[i] for i in rows[(block - 1) % len(rows)]]


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
