"""A bench shared by several candidates: each one's units read as a bench of one.

The order of the units is `qualify.core.designs`' (ABBA for one candidate, Williams for more); a
candidate's pairs are (pinned's unit, its unit) of each block: the same pinned units serve every
candidate, measured once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from qualify.core.designs import block_order
from qualify.records.bench import BenchUnit

__all__ = ["block_order", "candidate_view", "complete_pairs"]


def candidate_view(units: Iterable[BenchUnit], role: str) -> list[BenchUnit]:
    """The units of pinned and `role`, with `role` named "candidate": what one candidate's
    judgement reads from a schedule shared by several."""
    out = []
    for unit in units:
        if unit.role == "pinned":
            out.append(unit)
        elif unit.role == role:
            output = unit.output
            if output is not None and output.startswith(f"{role}/"):
                out.append(
                    unit.model_copy(
                        update={"role": "candidate", "output": f"candidate/{output[len(role) + 1 :]}"}
                    )
                )
            else:
                out.append(unit.model_copy(update={"role": "candidate"}))
    return out


def complete_pairs(units: Iterable[BenchUnit], roles: Sequence[str]) -> int:
    """Blocks in which every one of `roles` ran a unit that finished."""
    done: dict[int, set[str]] = {}
    for unit in units:
        if unit.phase == "pair" and unit.ok and unit.pair is not None:
            done.setdefault(unit.pair, set()).add(unit.role)
    return sum(1 for got in done.values() if set(roles) <= got)
