"""The bench's question: "not slower than pinned by more than the margin" (non-inferiority) by
default, "within the margin both ways" (equivalence) when the plan asks `gate = "no-change"`.
Intervals made by hand for each finding, saved units through the judge, and seeded simulations
of the error the gate bounds (a candidate slower by exactly the margin passing) and its power."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from benchsim import saved_check, simulate, steady

from qualify.bench import check as bench
from qualify.bench.judge import (
    FASTER,
    INCONCLUSIVE,
    NO_CHANGE,
    NOT_SLOWER_FINDING,
    SLOWER,
    Outcome,
    classify,
    evaluate,
)
from qualify.bench.params import NO_CHANGE_GATE, NOT_SLOWER, BenchParams
from qualify.bench.repetitions import invalid_plan
from qualify.core.checkspec import CheckSpec
from qualify.core.verdicts import Verdict
from qualify.stats import abtests


def interval(low: float, high: float, level: float = 0.0125) -> abtests.ShiftTest:
    """A reachable shift test whose ratio interval is [low, high]."""
    mid = (math.log(low) + math.log(high)) / 2
    return abtests.ShiftTest("made by hand", 16, mid, math.log(low), math.log(high), 0.5, level, 1e-4)


@pytest.mark.parametrize(
    ("low", "high", "margin", "finding"),
    [
        # The intervals that blocked candidates shown no more than 1.2 % (3.1 %) slower.
        (0.9879, 1.0539, 0.05, NOT_SLOWER_FINDING),
        (0.9687, 1.1187, 0.10, NOT_SLOWER_FINDING),
        (0.9949, 1.1850, 0.10, NOT_SLOWER_FINDING),
        (0.99, 1.02, 0.03, NO_CHANGE),
        (1.01, 1.30, 0.03, FASTER),
        (0.975, 0.99, 0.03, SLOWER),
        (0.95, 1.10, 0.03, INCONCLUSIVE),  # holds 1 − δ
        (0.95, 0.99, 0.03, INCONCLUSIVE),  # slower, but across 1 − δ
        (0.90, 0.96, 0.03, SLOWER),  # wholly below 1 − δ: a regression
    ],
)
def test_the_default_gate_decides_every_interval_that_does_not_hold_one_minus_the_margin(
    low: float, high: float, margin: float, finding: str
) -> None:
    got, regression, _ = classify(interval(low, high), margin)
    assert got == finding
    assert regression == (high < 1 - margin)


def test_equivalence_is_asked_by_name_and_leaves_a_wide_upper_end_undecided() -> None:
    wide = interval(0.9879, 1.0539)
    assert classify(wide, 0.05, NO_CHANGE_GATE)[0] == INCONCLUSIVE
    assert classify(wide, 0.05, NOT_SLOWER)[0] == NOT_SLOWER_FINDING
    assert classify(interval(0.99, 1.02), 0.03, NO_CHANGE_GATE)[0] == NO_CHANGE


def test_an_unreachable_level_decides_nothing_under_either_gate() -> None:
    unreachable = abtests.ShiftTest("made by hand", 3, 0.0, -math.inf, math.inf, 0.25, 0.0125, 0.25)
    for gate in (NOT_SLOWER, NO_CHANGE_GATE):
        assert classify(unreachable, 0.03, gate)[0] == INCONCLUSIVE


def test_a_candidate_not_slower_passes_the_check_where_equivalence_would_not(tmp_path: Path) -> None:
    """16 pairs, 3 % repetition jitter, the candidate 2 % faster: shown not slower (lower end
    above 0.97) but with an upper end past 1.03, so "no-change" cannot call it."""
    data = {"pp64": steady(16, 100, 102, 0.03, seed=0)}
    default = bench.judge(saved_check(tmp_path / "a", data, looks=[9, 16]))
    assert default.verdict is Verdict.PASS
    fact = default.facts.tests["pp64"]
    assert fact.finding == NOT_SLOWER_FINDING and fact.low >= 0.97 and fact.high > 1.03
    strict = bench.judge(saved_check(tmp_path / "b", data, looks=[9, 16], params={"gate": NO_CHANGE_GATE}))
    assert strict.verdict is Verdict.INCONCLUSIVE
    assert strict.facts.tests["pp64"].finding == INCONCLUSIVE


def test_an_unknown_gate_is_refused_before_anything_runs() -> None:
    spec = CheckSpec("b", "bench", {"run": "llama-bench", "gate": "sideways"}, {}, ("pinned", "candidate"))
    problem = invalid_plan(BenchParams.of(spec), spec)
    assert problem is not None and "sideways" in problem and '"not-slower"' in problem


def passed(outcomes: list[Outcome]) -> bool:
    return all(o.finding != INCONCLUSIVE and not o.regression for o in outcomes)


PLANNED = abtests.planned_looks(abtests.min_pairs(abtests.first_holm_level(0.05, 1, 2)), 16, 2)


@pytest.mark.parametrize("cv", [0.01, 0.03])
def test_a_candidate_slower_by_exactly_the_margin_passes_at_most_alpha(cv: float) -> None:
    """The error the gate bounds, simulated apart from the judge (lognormal unit noise, a drift
    and a position penalty): truly slower by δ = 3 %, passed in at most α of 400 runs plus two
    Monte Carlo standard errors."""
    rng = np.random.default_rng(20261206)
    runs = 400
    hits = sum(
        passed(evaluate([simulate(rng, 16, -0.03, cv, 0.002, 0.005)], PLANNED, 0.05, 0.03))
        for _ in range(runs)
    )
    assert hits / runs <= 0.05 + 2 * (0.05 * 0.95 / runs) ** 0.5, hits


def test_equal_builds_pass_where_the_noise_allows() -> None:
    """The power the default gate buys: at 1 % unit CV an A/A bench passes almost always, and at
    3 % more often than the equivalence gate does on the same data."""
    rng = np.random.default_rng(11)
    runs = 200
    quiet = sum(passed(evaluate([simulate(rng, 16, 0.0, 0.01)], PLANNED, 0.05, 0.03)) for _ in range(runs))
    assert quiet / runs >= 0.95, quiet
    noisy = [simulate(rng, 16, 0.0, 0.03) for _ in range(runs)]
    one_sided = sum(passed(evaluate([s], PLANNED, 0.05, 0.03)) for s in noisy)
    two_sided = sum(passed(evaluate([s], PLANNED, 0.05, 0.03, NO_CHANGE_GATE)) for s in noisy)
    assert one_sided > two_sided
