"""What a finished bisect or series says, and the exit code a command gives for it
(docs/bisect.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from qualify.core.errors import ExitCode
from qualify.records.bisect import Finding, Outcome

#: The exit code for each finding: the numbers every qualify command uses. Found (and a series
#: measured to its end) 0; not found, because the ends do not differ, 1; a range or an end that
#: could not be decided 3, as an incomplete run; bad usage stays 4 (`UsageError`).
EXIT_CODES: dict[Finding, ExitCode] = {
    Finding.FOUND: ExitCode.QUALIFIED,
    Finding.SERIES: ExitCode.QUALIFIED,
    Finding.NO_FLIP: ExitCode.NOT_QUALIFIED,
    Finding.BASELINE_BAD: ExitCode.NOT_QUALIFIED,
    Finding.RANGE: ExitCode.INCOMPLETE,
    Finding.END_UNKNOWN: ExitCode.INCOMPLETE,
}


@dataclass(frozen=True)
class Answer:
    """The end of a search: what it found, and what every step's probes settled.

    `good` and `bad` are the last good and first bad step (FOUND, RANGE), `between` the steps
    between them that no probe could decide (RANGE), `end` the end that stopped the search
    (NO_FLIP, BASELINE_BAD, END_UNKNOWN). `outcomes` holds every step's settled outcome, None
    for a step never probed.
    """

    finding: Finding
    outcomes: tuple[Outcome | None, ...]
    good: int | None = None
    bad: int | None = None
    between: tuple[int, ...] = ()
    end: int | None = None

    @property
    def contradictions(self) -> tuple[tuple[int, int], ...]:
        """Each BAD step followed by a GOOD one, among the steps probes decided (skipped and
        undecided ones left out): what no single flip explains."""
        return contradictions(self.outcomes)

    @property
    def monotone(self) -> bool:
        """Whether the probes made agree with one flip from good to bad."""
        return not self.contradictions

    @property
    def exit_code(self) -> ExitCode:
        return EXIT_CODES[self.finding]


def contradictions(outcomes: Sequence[Outcome | None]) -> tuple[tuple[int, int], ...]:
    """The (bad, good) pairs of steps where a GOOD comes next after a BAD among decided steps."""
    decided = [(i, o) for i, o in enumerate(outcomes) if o in (Outcome.GOOD, Outcome.BAD)]
    return tuple(
        (i, j)
        for (i, first), (j, second) in pairwise(decided)
        if first is Outcome.BAD and second is Outcome.GOOD
    )


def summary(answer: Answer, names: Sequence[str]) -> str:
    """One line saying what the answer found, naming steps by the series' names."""
    if answer.finding is Finding.FOUND:
        line = f"first bad step {names[_at(answer.bad)]}, last good {names[_at(answer.good)]}"
    elif answer.finding is Finding.RANGE:
        unknown = ", ".join(f"{names[s]} ({answer.outcomes[s]})" for s in answer.between)
        line = (
            f"the flip lies between {names[_at(answer.good)]} (good) and {names[_at(answer.bad)]} "
            f"(bad); no probe decided {unknown}"
        )
    elif answer.finding is Finding.NO_FLIP:
        line = f"no flip: the known-bad end {names[_at(answer.end)]} probed good"
    elif answer.finding is Finding.BASELINE_BAD:
        line = f"no flip to find: the known-good end {names[_at(answer.end)]} probed bad"
    elif answer.finding is Finding.END_UNKNOWN:
        end = _at(answer.end)
        line = f"cannot search: the end {names[end]} was {answer.outcomes[end]}"
    else:
        line = f"series of {len(names)} steps measured"
    if not answer.monotone:
        pairs = ", ".join(f"{names[b]} bad before {names[g]} good" for b, g in answer.contradictions)
        line += f"; not one flip: {pairs}"
    return line


def _at(step: int | None) -> int:
    # Each finding sets the steps it names (Answer's docstring); a missing one is a bug here.
    if step is None:
        raise ValueError("the answer names no step where its finding needs one")
    return step
