"""The search: from what the probes so far say of each step, the step to probe next, or the
answer (docs/bisect.md). Pure: the caller probes, records, and asks again, so a search resumed
from its saved state goes on exactly where it stopped.

Steps are 0..n-1: step 0 is the known-good end (the pinned arm), step n-1 the known-bad one
(the candidate). `known[i]` holds the outcomes of step i's finished probes, in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from qualify.bisect.answers import Answer
from qualify.bisect.outcomes import settle
from qualify.core.series import MIN_STEPS
from qualify.records.bisect import Finding, Outcome


def settled(known: Sequence[Sequence[Outcome]], retries: int) -> tuple[Outcome | None, ...]:
    """Every step's settled outcome (`settle`), None where it should still be probed."""
    if len(known) < MIN_STEPS:
        raise ValueError(f"a series has at least {MIN_STEPS} steps, its two ends; got {len(known)}")
    if retries < 0:
        raise ValueError(f"retries is 0 or more, not {retries}")
    return tuple(settle(outcomes, retries) for outcomes in known)


def bisect_next(known: Sequence[Sequence[Outcome]], retries: int) -> int | Answer:
    """The step to probe next, or the answer once the probes decide it.

    The ends are verified first, the good end before the bad one, each probed once; an end
    that does not hold stops the search. Then the open interval lies between the first BAD
    step and the last GOOD step below it, which always bracket a flip, even when the series
    flips more than once: the search finds *a* flip, and the answer says whether its probes
    saw more than one (`Answer.monotone`). Every probe lands inside the interval and either
    narrows it or removes a step from it, so the search ends after at most one probe a step
    (and the retries of undecided ones).
    """
    outcomes = settled(known, retries)
    good_end, bad_end = 0, len(outcomes) - 1
    for end, holds, broken in (
        (good_end, Outcome.GOOD, Finding.BASELINE_BAD),
        (bad_end, Outcome.BAD, Finding.NO_FLIP),
    ):
        found = outcomes[end]
        if found is None:
            return end
        if found is not holds:
            finding = broken if found in (Outcome.GOOD, Outcome.BAD) else Finding.END_UNKNOWN
            return Answer(finding, outcomes, end=end)
    bad = outcomes.index(Outcome.BAD)
    good = max(i for i in range(bad) if outcomes[i] is Outcome.GOOD)
    for step in nearest_first(good, bad):
        if outcomes[step] is None:
            return step
    if bad == good + 1:
        return Answer(Finding.FOUND, outcomes, good=good, bad=bad)
    # Only skipped and undecided steps are left between: the flip is one of their edges, and
    # which one no probe can say; the range is the answer, never a guess inside it.
    return Answer(Finding.RANGE, outcomes, good=good, bad=bad, between=tuple(range(good + 1, bad)))


def nearest_first(good: int, bad: int) -> Iterator[int]:
    """The steps strictly between `good` and `bad`, the midpoint first, then outwards, one
    above and one below in turn (as `git bisect` steps around a skipped commit), so that a
    skipped or undecided midpoint costs as little halving as it can."""
    middle = (good + bad) // 2
    if good < middle < bad:
        yield middle
    for distance in range(1, bad - good):
        for step in (middle + distance, middle - distance):
            if good < step < bad:
                yield step


def series_next(known: Sequence[Sequence[Outcome]], retries: int) -> int | Answer:
    """Series mode: every step in order, each until its probes settle it (undecided ones
    measured again, as in the search), for metrics that need not flip once. The answer holds
    every step's outcome; the caller reads the figures from each probe's evidence."""
    outcomes = settled(known, retries)
    for step, outcome in enumerate(outcomes):
        if outcome is None:
            return step
    return Answer(Finding.SERIES, outcomes)
