"""The values a number read from a plan may take: a range, each end included or not.

A check kind declares one per numeric parameter and limit (`qualify.checks.base`), the plan
loader refuses a value outside it before anything runs, and `qualify kinds` shows it. NaN and
infinity lie in no range: a comparison with NaN is always false, so a NaN limit would pass
anything, and an infinite one means "no limit" where a number was asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """Finite numbers from `low` to `high`; None leaves that end open."""

    low: float | None = None
    high: float | None = None
    low_included: bool = True
    high_included: bool = True

    def __contains__(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.low is not None and (value < self.low or (value == self.low and not self.low_included)):
            return False
        return not (
            self.high is not None and (value > self.high or (value == self.high and not self.high_included))
        )

    def words(self) -> str:
        """'more than 0 and less than 1', 'at least 2', 'any finite number'."""
        ends = []
        if self.low is not None:
            ends.append(f"{'at least' if self.low_included else 'more than'} {_number(self.low)}")
        if self.high is not None:
            ends.append(f"{'at most' if self.high_included else 'less than'} {_number(self.high)}")
        return " and ".join(ends) or "any finite number"

    def notation(self) -> str:
        """The range as the docs write it: '(0, 1)', '[0, 1]', '≥ 2', '> 0', 'any'."""
        if self.low is not None and self.high is not None:
            return (
                f"{'[' if self.low_included else '('}{_number(self.low)}, "
                f"{_number(self.high)}{']' if self.high_included else ')'}"
            )
        if self.low is not None:
            return f"{'≥' if self.low_included else '>'} {_number(self.low)}"
        if self.high is not None:
            return f"{'≤' if self.high_included else '<'} {_number(self.high)}"
        return "any"


def _number(value: float) -> str:
    return f"{value:g}"


def at_least(low: float) -> Range:
    return Range(low=low)


def above(low: float) -> Range:
    return Range(low=low, low_included=False)


#: Any finite number.
ANY = Range()
#: A probability that decides something: a level α or a confidence, never 0 or 1.
OPEN_UNIT = Range(0, 1, low_included=False, high_included=False)
#: A share of a whole, 0 and 1 included (an agreement rate).
UNIT = Range(0, 1)
#: Seconds something may take: more than nothing.
SECONDS = above(0)
#: A count of at least one.
POSITIVE = at_least(1)
#: A count or an amount that may be zero.
NON_NEGATIVE = at_least(0)
