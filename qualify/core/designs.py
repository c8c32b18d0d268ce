"""Orders that balance drift between roles measured in turn: ABBA for two, Williams for more.

Each block runs every role once, in one row of a Williams design: a Latin square in which every
role runs once in every position and follows every other role equally often (for an odd number
of roles, the square and its mirror). Two roles give ABBA (AB, BA, AB, …); with more, every
candidate runs before pinned as often as after it and no role always follows the same one, so a
drift (heat, caches) or a carry-over from the block before falls on every role alike. The bench
orders its units by it, the soak its blocks.
"""

from __future__ import annotations

from collections.abc import Sequence


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
