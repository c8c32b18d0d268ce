"""What one probe of a step says, and what a step's probes settle (docs/bisect.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qualify.records.bisect import Outcome, StepEvidence


@dataclass(frozen=True)
class Measured:
    """What a probe hands back: its outcome and the evidence for it (the run folder, the
    gate's verdict and figure), kept with the probe in the saved state; None for an outcome
    recorded without any."""

    outcome: Outcome
    evidence: StepEvidence | None = None


def settle(outcomes: Sequence[Outcome], retries: int) -> Outcome | None:
    """A step's outcome from its finished probes, in order; None while it should be probed
    (never probed, or undecided with retries left).

    A step probed both GOOD and BAD (probes a caller recorded from elsewhere: the search never
    probes a decided step again) is UNDECIDED: the gate disagrees with itself there, and which
    probe to believe would be a guess.
    """
    decided = {o for o in outcomes if o in (Outcome.GOOD, Outcome.BAD)}
    if len(decided) == 2:
        return Outcome.UNDECIDED
    if decided:
        return decided.pop()
    if Outcome.SKIP in outcomes:
        return Outcome.SKIP
    if len(outcomes) > retries:
        return Outcome.UNDECIDED
    return None
