"""qualify.stats.abtests against scipy.stats, and the numbers the bench schedule is built on."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as ss

from qualify.stats import abtests


@pytest.mark.parametrize("n", [1, 3, 5, 6, 8, 9, 12, 20])
def test_signed_rank_p_value_matches_scipy_exact(n: int) -> None:
    rng = np.random.default_rng(n)
    for shift in (0.0, 0.01, 0.05):
        d = rng.normal(shift, 0.02, n)
        ours = abtests.wilcoxon_signed_rank(d, 0.05)
        theirs = ss.wilcoxon(d, method="exact")
        assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)


def test_signed_rank_with_ties_is_the_exact_conditional_permutation_p() -> None:
    d = [0.02, -0.01, 0.02, 0.03, 0.01, 0.02, -0.02, 0.03, 0.05]  # |d| tied several times
    ours = abtests.wilcoxon_signed_rank(d, 0.05)

    def positive_rank_sum(x: np.ndarray) -> float:
        return float(ss.rankdata(np.abs(x))[x > 0].sum())

    # Every one of the 2^9 sign flips, scored with mid-ranks: the exact conditional p.
    perm = ss.permutation_test(
        (np.array(d),),
        positive_rank_sum,
        permutation_type="samples",
        n_resamples=math.inf,
        vectorized=False,
    )
    assert ours.p_value == pytest.approx(perm.pvalue, rel=1e-9)


def test_zero_differences_are_dropped_and_lower_the_reachable_level() -> None:
    result = abtests.wilcoxon_signed_rank([0.0, 0.0, 0.01, 0.02, 0.03, 0.01, 0.02, 0.04, 0.05], 0.01)
    assert result.min_p == pytest.approx(2 / 2**7)  # 7 non-zero pairs
    assert abtests.wilcoxon_signed_rank([0.0] * 9).p_value == 1.0


def test_hodges_lehmann_interval_is_the_walsh_averages_at_the_critical_value() -> None:
    rng = np.random.default_rng(7)
    d = rng.normal(0.02, 0.01, 12)
    result = abtests.wilcoxon_signed_rank(d, 0.05)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(12) for j in range(i, 12))
    assert result.estimate == pytest.approx(np.median(walsh))
    # n = 12, two-sided 0.05: the critical value of T is 13 (tables), so the 14th Walsh averages.
    assert result.low == walsh[13] and result.high == walsh[len(walsh) - 14]
    # The interval and the test agree: the interval excludes 0 exactly when p ≤ level.
    for shift in (-0.01, 0.0, 0.004, 0.01):
        r = abtests.wilcoxon_signed_rank(rng.normal(shift, 0.01, 12), 0.05)
        assert (r.p_value <= 0.05) == (r.low > 0 or r.high < 0)


def test_an_unreachable_level_gives_an_infinite_interval() -> None:
    result = abtests.wilcoxon_signed_rank([0.1] * 5, 0.05)  # all positive: the best 5 pairs can do
    assert result.p_value == pytest.approx(0.0625)
    assert not result.reachable
    assert result.ratio_low == 0.0 and math.isinf(result.ratio_high)


@pytest.mark.parametrize(("m", "n"), [(3, 3), (5, 5), (6, 9), (10, 10), (4, 12)])
def test_mann_whitney_matches_scipy_exact(m: int, n: int) -> None:
    rng = np.random.default_rng(m * 100 + n)
    x, y = rng.normal(0, 1, m), rng.normal(0.7, 1, n)
    ours = abtests.mann_whitney(x, y, 0.05)
    theirs = ss.mannwhitneyu(y, x, method="exact")
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-9)
    diffs = sorted(b - a for a in x for b in y)
    assert ours.estimate == pytest.approx(np.median(diffs))
    assert ours.min_p == pytest.approx(2 / math.comb(m + n, n))
    if ours.reachable:
        assert (ours.p_value <= 0.05) == (ours.low > 0 or ours.high < 0)


def test_mann_whitney_with_ties_is_the_exact_permutation_p() -> None:
    x, y = [1.0, 2.0, 2.0, 3.0, 4.0], [2.0, 3.0, 3.0, 5.0, 6.0, 6.0]
    ours = abtests.mann_whitney(x, y)

    def statistic(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        return ss.mannwhitneyu(b, a, axis=axis, method="asymptotic").statistic

    perm = ss.permutation_test((np.array(x), np.array(y)), statistic, n_resamples=math.inf)
    assert ours.p_value == pytest.approx(perm.pvalue, rel=1e-9)


def test_holm_steps_down_and_stops_at_the_first_miss() -> None:
    steps = abtests.holm([0.01, 0.04, 0.03, 0.005], 0.05)
    assert [s.level for s in steps] == pytest.approx([0.05 / 3, 0.025, 0.025, 0.0125])
    assert [s.rejected for s in steps] == [True, False, False, True]
    assert [s.adjusted_p for s in steps] == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_the_issues_worked_example_needs_nine_pairs_not_eight() -> None:
    level = abtests.first_holm_level(0.05, tests=4, looks=2)
    assert level == pytest.approx(0.00625)
    assert abtests.signed_rank_min_p(8) == pytest.approx(0.0078125)
    assert abtests.signed_rank_min_p(8) > level
    assert abtests.signed_rank_min_p(9) == pytest.approx(0.00390625)
    assert abtests.signed_rank_min_p(9) <= level
    assert abtests.min_pairs(level) == 9
    assert abtests.min_pairs(0.05) == 6 and abtests.min_pairs(0.0125) == 8


def test_looks_are_planned_before_any_pair_runs() -> None:
    assert abtests.look_alphas(0.05, 2) == (0.025, 0.025)
    assert abtests.planned_looks(9, 14, 2) == (9, 14)
    assert abtests.planned_looks(9, 21, 3) == (9, 15, 21)
    assert abtests.planned_looks(9, 4, 2) == (9,)  # the computed minimum wins over a small maximum
    assert abtests.planned_looks(8, 8, 1) == (8,)


def test_unit_summaries() -> None:
    assert abtests.log_median([1.0, 100.0, 10.0]) == pytest.approx(math.log(10))
    assert math.isnan(abtests.cv([10.0]))  # undefined, not a steady unit
    assert abtests.cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)
    assert abtests.geometric_mean([2.0, 0.5]) == pytest.approx(1.0)
    assert abtests.robust_sd([0.0, 1.0, 2.0, 100.0]) == pytest.approx(1.4826)


@pytest.mark.parametrize("seed", range(3))
def test_mean_shift_is_scipys_one_sample_t_test(seed: int) -> None:
    from scipy import stats

    x = np.random.default_rng(seed).lognormal(0, 1, 15) - 1.2
    ours = abtests.mean_shift(list(x), 0.05)
    theirs = stats.ttest_1samp(x, 0.0)
    low, high = theirs.confidence_interval(0.95)
    assert ours.estimate == pytest.approx(x.mean())
    assert ours.p_value == pytest.approx(theirs.pvalue, rel=1e-10)
    assert (ours.low, ours.high) == pytest.approx((low, high), rel=1e-10)


def test_mean_shift_tests_the_mean_where_the_signed_rank_tests_symmetry() -> None:
    """Nine rises of 1 and one fall of 9: mean 0, so no drift; the signed ranks put the fall's
    one large rank against nine small ones and lean upward."""
    x = [1.0] * 9 + [-9.0]
    assert abtests.mean_shift(x, 0.05).p_value == pytest.approx(1.0)
    assert abtests.mean_shift(x, 0.05).low < 0 < abtests.mean_shift(x, 0.05).high
    assert abtests.wilcoxon_signed_rank(x, 0.05).estimate > 0
