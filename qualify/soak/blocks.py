"""The order of a soak: the roles one after the other, or interleaved in blocks.

One after the other (`block_s = 0`), pinned soaks for the whole duration, its server stops,
then the candidate does the same: at most one server is up, but anything that changes on the
machine between the two (another tenant, heat, the page cache) shows as a difference between
the roles. Interleaved (`block_s > 0`), each role's duration is cut into blocks of `block_s`
seconds run in ABBA order — P C, C P, P C, … — so a change that drifts linearly over the soak
falls on both roles alike, as in the bench stage. Both servers are up for the whole soak (each
keeps its memory, and any leak, across its blocks; the machine needs room for two), and only
the role whose block it is gets load, telemetry, compaction and the kernel-log watch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from qualify.core.context import abba_order


@dataclass(frozen=True)
class Block:
    """A span [start_s, end_s) of one role's clock, the role's `index`-th of `count`."""

    role: str
    index: int
    count: int
    start_s: float
    end_s: float

    def contains(self, t_s: float) -> bool:
        return self.start_s <= t_s < self.end_s


def plan_blocks(roles: tuple[str, ...], duration_s: float, block_s: float) -> list[Block]:
    """The blocks in the order they run. One block per role, in `roles` order, when `block_s` is
    0 or covers the whole duration; ABBA pairs otherwise (the last block may be shorter)."""
    if block_s <= 0 or block_s >= duration_s or len(roles) != 2:
        return [Block(role, 0, 1, 0.0, duration_s) for role in roles]
    count = math.ceil(duration_s / block_s)
    spans = [(k * block_s, min((k + 1) * block_s, duration_s)) for k in range(count)]
    return [
        Block(role, k, count, *spans[k]) for k, pair in enumerate(abba_order(roles, count)) for role in pair
    ]
