"""The numerics stage's looks: the chunks judged first, and more only while the data cannot decide.

A corpus scored whole spends the same chunks on a candidate that is plainly non-inferior (or
plainly broken) as on one sitting on the margin. Instead the stage looks at planned chunk counts,
`min_chunks`, twice that, four times … and the corpus' end (`planned_looks`, at most `looks` of
them), and the judgement stops at the first look where nothing is INCONCLUSIVE. With
`stream = true` the scoring stops there too: the writers still running are ended and the rest of
the corpus is never scored (`qualify.numerics.streamed`).

Error control is the bench's: α is split evenly over the planned looks (a Bonferroni bound, as
`qualify.stats.abtests.look_alphas`), and every bound at a look is taken at 1 − α/K. A wrong
PASS (or a wrong FAIL) then happens at some look with probability at most K × α/K = α, whatever
rule decides when to stop. The price is a wider bound at each look than a single look would
have; `benchmarks/calibration.py` measures both rates and the chunks a decision takes.

The judge replays the looks on the saved vectors (`sequential`), so a rejudge reaches the same
look and verdict as the measurement did, and a look that stopped the scoring is found again:
the saved vectors end there. Results from before looks existed carry no planned looks and are
judged as one look over every chunk, at the plan's confidence, as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from qualify.numerics.evidence import LookFacts
from qualify.stats.abtests import look_alphas, look_points

T = TypeVar("T")


def planned_looks(first: int, looks: int, total: int) -> tuple[int, ...]:
    """`first`, twice it, four times … below `total`, then `total`: at most `looks` in all
    (one look, at `total`, when `total` is at most `first`)."""
    if total <= 0:
        return ()
    points: list[int] = []
    n = max(first, 1)
    while n < total and len(points) < looks - 1:
        points.append(n)
        n *= 2
    return (*points, total)


def look_confidence(confidence: float, planned: int) -> float:
    """Each look's one-sided confidence: 1 − α/K for K planned looks."""
    return 1 - look_alphas(1 - confidence, max(planned, 1))[0]


@dataclass(frozen=True)
class Stop(Generic[T]):
    """Where the looks stopped: the look (1-based), its chunks, its confidence, and what was
    judged there."""

    look: int
    chunks: int
    confidence: float
    planned: tuple[int, ...]
    outcome: T

    def facts(self) -> LookFacts:
        return LookFacts(
            planned=list(self.planned), look=self.look, chunks=self.chunks, confidence=self.confidence
        )


def sequential(
    planned: Sequence[int],
    scored: int,
    confidence: float,
    judge_at: Callable[[int, float], T],
    decided: Callable[[T], bool],
) -> Stop[T]:
    """Judge the first `n` chunks at each look reached (`judge_at(n, confidence)`), stopping at
    the first whose outcome is `decided`, else at the last look reached. Scoring that ended
    between two planned looks gets a last look where it ended, spending the next look's α
    (`look_points`). No planned looks (a result from before them) is one look at `scored`."""
    plan = tuple(planned) or (scored,)
    level = look_confidence(confidence, len(plan))
    points = look_points(plan, scored) or [scored]
    for i, n in enumerate(points):
        outcome = judge_at(n, level)
        if decided(outcome) or i == len(points) - 1:
            return Stop(i + 1, n, level, plan, outcome)
    raise AssertionError("unreachable: the last look returns")
