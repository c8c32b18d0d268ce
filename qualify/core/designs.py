"""Orders that balance drift between roles measured in turn: ABBA for two, Williams for more.

Each block runs every role once, in one row of a Williams design: a Latin square in which every
role runs once in every position and follows every other role equally often (for an odd number
of roles, the square and its mirror). Two roles give ABBA (AB, BA, AB, …); with more, every
candidate runs before pinned as often as after it and no role always follows the same one, so a
drift (heat, caches) or a carry-over from the block before falls on every role alike. Blocks run
back to back, so the rows are chained: each block begins with the role the block before ended
with, and every role follows itself equally often, as in ABBA (`_chained`; for four or more
roles that takes 2n rows).
The bench orders its units by it, the soak its blocks.
"""

from __future__ import annotations

from collections.abc import Sequence


def williams_rows(count: int, *, chained: bool = True) -> list[list[int]]:
    """The rows of a Williams design for `count` treatments (0 .. count-1), in the order blocks
    run them, chained across block boundaries (`_chained`). `chained=False`: the design as
    published, its rows in their plain order (for an odd count the square, then its mirror)."""
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
    elif chained and count > 2:
        # Row i ends with i + n/2, so these rows alone cannot be chained (see `_chained`); the
        # same square with its treatments relabelled (h + i keeps its label, i becomes i + 1
        # mod h, h = n/2) ends each row elsewhere, and the two squares together can.
        h = count // 2
        label = [(i + 1) % h for i in range(h)] + list(range(h, count))
        rows += [[label[x] for x in row] for row in rows]
    return _chained(rows) if chained else rows


def _chained(rows: list[list[int]]) -> list[list[int]]:
    """`rows` reordered so that each ends with the treatment the next begins with (cyclically).

    Blocks run back to back, so the first unit of a block follows the last of the one before:
    a carry-over the rows themselves do not balance. Chained, every such boundary is a
    treatment following itself, and each treatment does so equally often (twice in 2n rows) —
    what ABBA does for two. The rows are the edges first → last of a graph in which every
    treatment starts two rows and ends two; when it is connected (an odd design's square and
    mirror: steps of (n + 1)/2, coprime to n; an even one's two squares: the two matchings
    i ↔ i + h and i + h ↔ i + 1 make one cycle) an Eulerian circuit (Hierholzer's) visits each
    row once. Unchained, a 2 % carry-over from one candidate's units onto the next unit made
    13 % of A/A sets of three candidates (four roles) call a difference at CV 1 %
    (`benchmarks/calibration.py`).
    """
    unused: dict[int, list[int]] = {}
    for index, row in enumerate(rows):
        unused.setdefault(row[0], []).append(index)
    for starts in unused.values():
        starts.reverse()  # pop() takes the lowest-numbered row first: deterministic
    stack: list[int] = [rows[0][0]]
    edges: list[int] = []
    path: list[int] = []
    while stack:
        node = stack[-1]
        if unused.get(node):
            index = unused[node].pop()
            edges.append(index)
            stack.append(rows[index][-1])
        else:
            stack.pop()
            if edges:
                path.append(edges.pop())
    order = path[::-1]
    if len(order) != len(rows):  # not connected: keep the rows as they were
        return rows
    return [rows[i] for i in order]


def block_order(roles: Sequence[str], block: int) -> list[str]:
    """The order of `roles` in block `block` (1-based): row (block - 1) of the design, cycling."""
    rows = williams_rows(len(roles))
    return [roles[i] for i in rows[(block - 1) % len(rows)]]
