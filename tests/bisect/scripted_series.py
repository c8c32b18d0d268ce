"""A series whose true outcomes a test writes down, probed without building anything: the
stand-in for a nix build and a qualification run per step, which the search never sees (it
reads only outcomes), so the search's rules can be tried on every shape of series in moments.

A series is written as words, one a step: `"G G S UUB B"` is a good step, a good one, one that
does not build, one undecided twice then bad, and a bad one. A step's k-th finished probe finds
its k-th letter (its last letter once they run out).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from qualify.bisect.answers import Answer
from qualify.bisect.drive import drive
from qualify.bisect.outcomes import Measured
from qualify.bisect.search import bisect_next, series_next
from qualify.bisect.state import BisectState, Step
from qualify.records.bisect import Mode, Outcome, StepEvidence

LETTERS = {"G": Outcome.GOOD, "B": Outcome.BAD, "S": Outcome.SKIP, "U": Outcome.UNDECIDED}


def parse(text: str) -> list[list[Outcome]]:
    return [[LETTERS[letter] for letter in word] for word in text.split()]


def names(length: int) -> list[str]:
    return [f"tc-{i}" for i in range(length)]


class Scripted:
    """Probes a state's steps by the written series; raises KeyboardInterrupt instead of
    answering its `interrupt_at`-th probe (counted from 1), as Ctrl-C mid-build would."""

    def __init__(self, truth: list[list[Outcome]], state: BisectState, interrupt_at: int | None = None):
        self.truth = truth
        self.state = state
        self.interrupt_at = interrupt_at
        self.calls: list[int] = []

    def __call__(self, step: Step) -> Measured:
        self.calls.append(step.index)
        if len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        # The step's finished probes so far pick the answer: an interrupted probe measured
        # nothing, so the probe after it finds what it would have found.
        finished = len(self.state.known()[step.index])
        word = self.truth[step.index]
        outcome = word[min(finished, len(word) - 1)]
        run = f"{step.name}-attempt-{step.attempt}"
        return Measured(outcome, StepEvidence(run=run, gate="scripted", verdict=outcome.value, reason=""))

    def counts(self) -> Counter[int]:
        return Counter(self.calls)


def new_state(tmp_path: Path, length: int, mode: Mode = Mode.BISECT, retries: int = 2) -> BisectState:
    return BisectState.create(tmp_path / "bisect.json", names(length), mode=mode, retries=retries)


def run(tmp_path: Path, text: str, *, mode: Mode = Mode.BISECT, retries: int = 2) -> tuple[Answer, Scripted]:
    """The whole search over a written series, saved in `tmp_path`."""
    truth = parse(text)
    state = new_state(tmp_path, len(truth), mode, retries)
    probe = Scripted(truth, state)
    return drive(state, probe), probe


def search_in_memory(
    truth: list[list[Outcome]],
    retries: int,
    known: list[list[Outcome]] | None = None,
    *,
    series: bool = False,
) -> tuple[Answer, list[int], list[list[Outcome]]]:
    """The search alone, nothing saved: its answer, the steps it probed in order, and every
    step's outcomes (those `known` beforehand first)."""
    known = [list(k) for k in known] if known else [[] for _ in truth]
    probed: list[int] = []
    choose = series_next if series else bisect_next
    for _ in range(10_000):
        move = choose(known, retries)
        if isinstance(move, Answer):
            return move, probed, known
        probed.append(move)
        word = truth[move]
        known[move].append(word[min(len(known[move]), len(word) - 1)])
    raise AssertionError("the search did not end within 10 000 probes")
