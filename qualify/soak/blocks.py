"""The order of a soak: the roles one after the other, or interleaved in blocks.

One after the other (`block_s = 0`), pinned soaks for the whole duration, its server stops,
then the candidate does the same: at most one server is up, but anything that changes on the
machine between the two (another tenant, heat, the page cache) shows as a difference between
the roles. Interleaved (`block_s > 0`), each role's duration is cut into blocks of `block_s`
seconds run in ABBA order — P C, C P, P C, … — so a change that drifts linearly over the soak
falls on both roles alike, as in the bench stage; a run set soaking its members together runs
pinned and every member's arm in the rows of a Williams design. Every server is up for the
whole soak (each keeps its memory, and any leak, across its blocks; the machine needs room for
all of them), and only the role whose block it is gets load, telemetry, compaction and the
kernel-log watch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from qualify.core.designs import block_order


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
    0 or covers the whole duration; otherwise rounds of one block per role, ABBA for two roles and
    the rows of a Williams design for more (a run set soaking its members together: pinned and
    every member's arm), the last block of each role possibly shorter."""
    if block_s <= 0 or block_s >= duration_s or len(roles) < 2:
        return [Block(role, 0, 1, 0.0, duration_s) for role in roles]
    count = math.ceil(duration_s / block_s)
    spans = [(k * block_s, min((k + 1) * block_s, duration_s)) for k in range(count)]
    return [Block(role, k, count, *spans[k]) for k in range(count) for role in block_order(roles, k + 1)]
