"""The numerics stage's looks: the chunks judged first, and more only while the data cannot decide.

A corpus scored whole spends the same chunks on a candidate that is plainly non-inferior (or
plainly broken) as on one sitting on the margin. Instead the stage looks at planned chunk counts,
`min_chunks`, twice that, four times … and the corpus' end (`planned_looks`, at most `looks` of
them), and the judgement stops at the first look where nothing is INCONCLUSIVE. With
`stream = true` the scoring stops there too: the writers still running are ended and the rest of
the corpus is never scored (`qualify.numerics.streamed`).

Error control. At a look of n of the N chunks planned, every mean is bounded by the wider of two
bounds (`qualify.numerics.bounds.mean_bound`): the BCa bound at 1 − α/K, α split evenly over the
K planned looks as the bench splits it (`qualify.stats.abtests.look_alphas`), and Cantelli's
guard, planned across the looks before any chunk is scored (`guard_plan`):

- stretched (the default): at the plan's own 1 − α, its half-width stretched by √(N/n) (the
  one-sided Kolmogorov–Cantelli maximal inequality bounds the partial sums at every n ≤ N at
  once). The last look's bound is a single look's; the first ones are wide, which costs little
  where the looks lie close together (48/96/192: 8.7, 6.2 and 4.4 se) but leaves nothing to
  decide early on a large corpus (15 se at 48 of 576 chunks).
- first apart, for a large corpus (three looks or more, the last at least eight times the
  first): a fifth of α is set apart for the first look alone (Cantelli at 1 − α/5, unstretched:
  9.95 se), the rest bounds every later look by the maximal inequality (1 − 4α/5, stretched:
  12.0, 8.5 and 4.9 se at 96, 192 and 576 of 576). The two families' errors add up to α at most.
  Near-normal equal builds then PASS at the first look in most data sets where the stretched
  guard passed almost none there, for a last look 12 % wider.

Splitting α evenly over the looks (Cantelli at 1 − α/K at every look, 8.9 se at each of four)
decides earliest on near-normal chunks but loses the last look: on autocorrelated or
heavy-tailed chunks equal builds PASS about half as often by the corpus' end, so no plan takes it
(`benchmarks/calibration.py --only numerics-large` measures all three on the same data sets).
The shape depends on the planned looks and α alone, never on the chunks, so it keeps its
guarantee. A wrong PASS (or a wrong FAIL) needs
the wider bound wrong at some look, so both wrong there: either family's guarantee suffices, the
BCa's (K × α/K = α, as far as BCa holds its level: it does not on heavy-tailed or autocorrelated
chunks) or the guard's (α). The guard's is not exact either: the inequality holds for
independent chunks (martingale differences) of a known σ, where σ is estimated from the chunks
at each look, and chunks autocorrelated in corpus order are held only through their long-run SD
(`qualify.numerics.bounds.long_run_sd`), which a short series underestimates. What is left is
measured, not assumed: `benchmarks/calibration.py` simulates every model the README lists, and
the chunks a decision takes.

The judge replays the looks on the saved vectors (`sequential`), so a rejudge reaches the same
look and verdict as the measurement did, and a look that stopped the scoring is found again:
the saved vectors end there. Results from before looks existed carry no planned looks and are
judged as one look over every chunk, at the plan's confidence, as they were.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from qualify.records.numerics import LookFacts
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


#: The share of α the "first apart" guard spends at the first look alone.
FIRST_SHARE = 0.2
#: A corpus this many times its first look or more (with three looks or more) is large: the
#: stretched guard's first looks decide almost nothing there.
LARGE_CORPUS = 8

Shape = Literal["stretched", "first apart", "split"]


@dataclass(frozen=True)
class GuardPlan:
    """Cantelli's guard across the planned looks (the module's docstring): its shape, and the
    confidence and stretch of its bound at a look."""

    shape: Shape
    confidence: float  # the plan's 1 − α
    planned: tuple[int, ...]

    def at(self, chunks: int) -> tuple[float, float]:
        """(confidence, stretch) of the guard at a look of `chunks`."""
        alpha = 1 - self.confidence
        last = self.planned[-1] if self.planned else chunks
        stretch = math.sqrt(max(last, chunks) / chunks) if chunks > 0 else 1.0
        if self.shape == "split":
            return look_confidence(self.confidence, len(self.planned)), 1.0
        if self.shape == "first apart" and len(self.planned) > 1:
            if chunks <= self.planned[0]:
                return 1 - FIRST_SHARE * alpha, 1.0
            return 1 - (1 - FIRST_SHARE) * alpha, stretch
        return self.confidence, stretch


def guard_plan(planned: Sequence[int], confidence: float) -> GuardPlan:
    """The guard's shape for these looks, from the plan alone: "first apart" on a large corpus
    (three looks or more, the last at least `LARGE_CORPUS` times the first), else stretched."""
    plan = tuple(planned)
    large = len(plan) >= 3 and plan[-1] >= LARGE_CORPUS * plan[0]
    return GuardPlan("first apart" if large else "stretched", confidence, plan)


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
