"""The loop a command runs: ask the search for the next step, save that it started, probe it,
save what it found, until the search answers (docs/bisect.md). Stopped anywhere, by an
interrupt or a crash, it resumes from the saved state (`qualify.bisect.resume`)."""

from __future__ import annotations

from collections.abc import Callable

from qualify.bisect.answers import Answer
from qualify.bisect.outcomes import Measured
from qualify.bisect.search import bisect_next, series_next
from qualify.bisect.state import BisectState, Step
from qualify.records.bisect import Mode

#: What probes one step: builds it, runs the gate, and says what it found.
Prober = Callable[[Step], Measured]


def next_move(state: BisectState) -> int | Answer:
    """The step to probe next in `state`'s mode, or its answer."""
    choose = series_next if state.mode is Mode.SERIES else bisect_next
    return choose(state.known(), state.retries)


def drive(state: BisectState, probe: Prober) -> Answer:
    """Probe until the search answers, saving every probe as it starts and as it ends. An
    exception out of `probe` (KeyboardInterrupt included) leaves that probe saved as started,
    to be probed again on resume."""
    while True:
        move = next_move(state)
        if isinstance(move, Answer):
            return move
        measured = probe(state.begin(move))
        state.finish(measured)
