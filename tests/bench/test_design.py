"""Carry-over across the boundaries of the blocks a bench (or a soak) runs back to back."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from qualify.core.designs import block_order, williams_rows


def boundaries(rows: list[list[int]]) -> Counter[tuple[int, int]]:
    """(last of a block, first of the next), cyclically over the design's rows."""
    return Counter((rows[i][-1], rows[(i + 1) % len(rows)][0]) for i in range(len(rows)))


@pytest.mark.parametrize("count", [3, 5, 7])
def test_odd_designs_are_chained_so_every_role_follows_itself_equally(count: int) -> None:
    """The square and its mirror in their plain order: with 3 roles, across block boundaries
    role 2 never followed itself while roles 0 and 1 did. Chained, each boundary is a role
    following itself, each role twice, and within blocks every ordered pair still appears
    equally often: over the 2n blocks each role is preceded by every role (itself included)
    equally often."""
    rows = williams_rows(count)
    assert sorted(map(tuple, rows)) == sorted(map(tuple, williams_rows(count, chained=False)))
    assert boundaries(rows) == Counter({(r, r): 2 for r in range(count)})
    sequence = [x for row in rows for x in row]
    before = Counter(itertools.pairwise(sequence + sequence[:1]))
    assert set(before.values()) == {2} and len(before) == count * count
    plain = boundaries(williams_rows(3, chained=False))
    assert {a for a, b in plain if a == b} != {0, 1, 2}  # the unchained order leaves one out


def test_two_roles_stay_abba_and_blocks_cycle_the_chained_rows() -> None:
    assert williams_rows(2) == [[0, 1], [1, 0]]
    roles = ("pinned", "a", "b")
    orders = [block_order(roles, b) for b in range(1, 8)]
    assert orders[0] == ["pinned", "a", "b"] and orders[6] == orders[0]
    assert all(orders[k][-1] == orders[k + 1][0] for k in range(6))


def test_even_designs_of_four_or_more_take_two_squares_to_chain() -> None:
    """Row i of an even square ends with i + n/2, so its own rows cannot be chained (with four
    roles, unchained, each role was preceded across a boundary by one other role only: a 2 %
    carry-over from one candidate made 13 % of A/A sets call a difference). The square and a
    relabelled copy chain, with every balance of the design kept."""
    for count in (4, 6):
        plain = williams_rows(count, chained=False)
        assert len(plain) == count and all(a != b for a, b in boundaries(plain))
        rows = williams_rows(count)
        assert len(rows) == 2 * count
        assert boundaries(rows) == Counter({(r, r): 2 for r in range(count)})
        for position in range(count):
            assert Counter(r[position] for r in rows) == Counter({r: 2 for r in range(count)})
        follows = Counter(p for r in rows for p in itertools.pairwise(r))
        assert len(follows) == count * (count - 1) and set(follows.values()) == {2}
