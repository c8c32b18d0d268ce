"""Hundreds of random series (a fixed seed, so a failure is the same on every machine): one
flip or several, skipped and undecided steps, broken ends, outcomes known beforehand. Whatever
the series, the search ends, probes no step it had settled, and its answer follows from the
outcomes its probes saw, checked here by rules written again from docs/bisect.md."""

from __future__ import annotations

import math
import random
from itertools import pairwise

from scripted_series import search_in_memory

from qualify.records.bisect import Finding, Outcome

G, B, S, U = Outcome.GOOD, Outcome.BAD, Outcome.SKIP, Outcome.UNDECIDED
CASES = 600


def random_series(rng: random.Random) -> tuple[list[list[Outcome]], bool]:
    """A series and whether it is plain: one flip, every step decided at its first probe."""
    length = rng.randint(2, 17)
    first_bad = rng.randint(1, length - 1)
    steps = [[G] if i < first_bad else [B] for i in range(length)]
    plain = rng.random() < 0.3
    if plain:
        return steps, True
    if rng.random() < 0.3:  # flips more than once
        steps = [steps[0], *([rng.choice([G, B])] for _ in range(length - 2)), steps[-1]][:length]
    for step in range(length):
        ends = step in (0, length - 1)
        roll = rng.random()
        if roll < (0.03 if ends else 0.15):
            steps[step] = [S]
        elif roll < (0.08 if ends else 0.3):
            steps[step] = [U] * rng.randint(1, 4) + rng.choice([[], [G], [B], steps[step]])
        elif ends and roll < 0.12:
            steps[step] = [G if steps[step] == [B] else B]  # an end that does not hold
    return steps, False


def expected_settled(outcomes: list[Outcome], retries: int) -> Outcome | None:
    decided = {o for o in outcomes if o in (G, B)}
    if decided:
        return U if len(decided) > 1 else decided.pop()
    if S in outcomes:
        return S
    return U if len(outcomes) >= retries + 1 else None


def test_every_answer_follows_from_the_probes_made() -> None:
    rng = random.Random(20_260_605)
    findings: set[Finding] = set()
    unmonotone = 0
    for case in range(CASES):
        truth, plain = random_series(rng)
        length = len(truth)
        retries = rng.randint(0, 3)
        known: list[list[Outcome]] = [[] for _ in truth]
        if rng.random() < 0.2:  # a few steps known from elsewhere, true or not
            plain = False
            for step in rng.sample(range(length), rng.randint(1, length)):
                known[step] = [rng.choice([G, B, S, U])]
        before = [list(k) for k in known]
        answer, probed, after = search_in_memory(truth, retries, known)
        where = f"case {case}: truth {truth}, known {before}, retries {retries}, probed {probed}"
        settled = [expected_settled(k, retries) for k in after]
        assert list(answer.outcomes) == settled, where

        # No step is probed once its probes settled it; an undecided one at most retries + 1 times.
        for step in set(probed):
            seen = after[step][len(before[step]) :]
            assert expected_settled(before[step], retries) is None, where
            assert all(
                expected_settled(before[step] + seen[:i], retries) is None for i in range(len(seen))
            ), where

        # Where a GOOD comes after a BAD, the answer says so, naming the steps.
        decided = [(i, o) for i, o in enumerate(settled) if o in (G, B)]
        pairs = [(i, j) for (i, a), (j, b) in pairwise(decided) if (a, b) == (B, G)]
        assert list(answer.contradictions) == pairs and answer.monotone == (not pairs), where
        unmonotone += not answer.monotone

        ends = (settled[0], settled[-1])
        findings.add(answer.finding)
        if answer.finding is Finding.BASELINE_BAD:
            assert ends[0] is B and answer.end == 0, where
        elif answer.finding is Finding.NO_FLIP:
            assert ends == (G, G) and answer.end == length - 1, where
        elif answer.finding is Finding.END_UNKNOWN:
            assert answer.end in (0, length - 1) and settled[answer.end] in (S, U), where
            assert answer.end == 0 or ends[0] is G, where
        else:
            good, bad = answer.good, answer.bad
            assert good is not None and bad is not None and ends == (G, B), where
            assert settled[good] is G and settled[bad] is B, where
            assert bad == settled.index(B), "the first bad step seen"
            assert all(o is not G for o in settled[good + 1 : bad]), where
            if answer.finding is Finding.FOUND:
                assert bad == good + 1 and answer.between == (), where
            else:
                assert answer.finding is Finding.RANGE, where
                assert answer.between == tuple(range(good + 1, bad)) and answer.between, where
                assert all(settled[s] in (S, U) for s in answer.between), where
        if plain:
            assert answer.finding is Finding.FOUND, where
            assert truth[answer.bad or 0] == [B] and truth[answer.good or 0] == [G], where
            assert len(probed) <= math.ceil(math.log2(length - 1)) + 2, where
        assert len(probed) <= length * (retries + 1), where
    # The seed reaches every kind of answer and series that flip more than once.
    assert findings == {
        Finding.FOUND,
        Finding.RANGE,
        Finding.NO_FLIP,
        Finding.BASELINE_BAD,
        Finding.END_UNKNOWN,
    }
    assert unmonotone > 10
