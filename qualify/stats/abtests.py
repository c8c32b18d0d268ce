"""Small pure statistics for A/B benchmarks: exact rank tests, Hodges–Lehmann intervals, Holm
and an α split across planned looks.

Every test returns its effect size, interval and p-value together with the level it was held
to and whether that level is reachable with the samples at hand; nothing returns a bare
"significant" bool. Values are on the log scale (log of a unit's median throughput), so a shift
`d` is the log of a ratio and `exp(d)` is the ratio itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ShiftTest:
    """A location-shift test and its Hodges–Lehmann estimate, on the log scale.

    `low`/`high` bound the shift at confidence 1 − `level`; they are ±inf when the samples
    cannot reach `level` at all (`reachable` false): such a test never decides anything.
    """

    method: str
    n: int  # pairs (paired test) or units of the smaller side (unpaired)
    estimate: float
    low: float
    high: float
    p_value: float
    level: float
    min_p: float  # the smallest two-sided p-value these sample sizes can produce

    @property
    def reachable(self) -> bool:
        return self.min_p <= self.level

    @property
    def ratio(self) -> float:
        return math.exp(self.estimate)

    @property
    def ratio_low(self) -> float:
        return math.exp(self.low) if math.isfinite(self.low) else 0.0

    @property
    def ratio_high(self) -> float:
        return math.exp(self.high) if math.isfinite(self.high) else math.inf


def log_median(samples: Sequence[float]) -> float:
    """The log of the median of one unit's repetitions (the unit's value in every test)."""
    if not samples:
        raise ValueError("a unit needs at least one sample")
    return math.log(statistics.median(samples))


def log_mean(samples: Sequence[float]) -> float:
    """The mean of the logs of one unit's repetitions (the log of their geometric mean): the
    unit's value where its repetitions sample a mixture of a host's states, so that the value
    moves with the share of each state rather than jumping between them as a median does."""
    if not samples:
        raise ValueError("a unit needs at least one sample")
    return statistics.fmean(math.log(v) for v in samples)


def cv(samples: Sequence[float]) -> float:
    """Coefficient of variation (sample SD / mean) of one unit's repetitions; NaN for fewer than
    two, where it is undefined (0 would read as a perfectly steady unit and pass any limit)."""
    if len(samples) < 2:
        return math.nan
    return statistics.stdev(samples) / statistics.fmean(samples)


def _doubled_midranks(values: Sequence[float]) -> list[int]:
    """Twice the mid-ranks (1-based) of `values`: integers even when ties share a rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + 1) + (j + 1)  # 2 × mean of ranks i+1 .. j+1
        i = j + 1
    return ranks


def _sign_sum_distribution(scores: Sequence[int]) -> np.ndarray:
    """P(sum of the scores given a + sign = s) when each sign is a fair coin (the null)."""
    dist = np.zeros(sum(scores) + 1)
    dist[0] = 1.0
    for score in scores:
        shifted = np.zeros_like(dist)
        shifted[score:] = dist[: len(dist) - score]
        dist = 0.5 * (dist + shifted)
    return dist


def _subset_sum_distribution(scores: Sequence[int], size: int) -> np.ndarray:
    """P(sum of a uniformly random `size`-subset of `scores` = s) (the rank-sum null)."""
    total = sum(scores)
    counts = np.zeros((size + 1, total + 1))
    counts[0, 0] = 1.0
    for score in scores:
        # Taking `score` into a subset of k-1 items makes one of k items: update k downwards.
        counts[1:, score:] = counts[1:, score:] + counts[:-1, : total + 1 - score]
    row: np.ndarray = counts[size] / counts[size].sum()
    return row


def _two_sided(dist: np.ndarray, observed: int) -> float:
    cdf = float(dist[: observed + 1].sum())
    sf = float(dist[observed:].sum())
    return min(1.0, 2.0 * min(cdf, sf))


def _lower_critical(dist: np.ndarray, tail: float) -> int | None:
    """The largest c with P(S ≤ c) ≤ tail, or None when even P(S = 0) exceeds it."""
    cumulative = np.cumsum(dist)
    below = np.nonzero(cumulative <= tail * (1 + 1e-12))[0]
    return int(below[-1]) if len(below) else None


def signed_rank_min_p(n: int) -> float:
    """The smallest two-sided p-value an exact signed-rank test on n non-zero pairs can give."""
    return min(1.0, 2.0 * 0.5**n)


def wilcoxon_signed_rank(differences: Sequence[float], level: float = 0.05) -> ShiftTest:
    """Exact paired Wilcoxon signed-rank test with the Hodges–Lehmann estimate and interval.

    Test: H0 "the paired differences are symmetric about 0", two-sided, at `level` (α after
    any Holm and look adjustment). Zero differences are dropped (Wilcoxon's convention), which
    lowers n. Ties among |d| get mid-ranks and the p-value comes from the exact conditional
    distribution of those scores (every sign flip enumerated by convolution), not from a normal
    approximation, so it stays exact with ties.

    Estimate: the median of the Walsh averages (d_i + d_j)/2, i ≤ j. Interval: the Walsh
    averages at the signed-rank critical value for `level` (Tukey's distribution-free interval,
    exact without ties). When 2/2^n > `level` no interval exists at that confidence: the bounds
    are ±inf and `reachable` is false — the samples cannot decide.

    Fallback: when pairing is broken (a unit missing), use `mann_whitney` instead.
    """
    d = [float(x) for x in differences]
    if not d:
        raise ValueError("the signed-rank test needs at least one pair")
    walsh = sorted((d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d)))
    estimate = float(np.median(walsh))
    nonzero = [x for x in d if x != 0.0]
    if nonzero:
        scores = _doubled_midranks([abs(x) for x in nonzero])
        observed = sum(s for s, x in zip(scores, nonzero, strict=True) if x > 0)
        p_value = _two_sided(_sign_sum_distribution(scores), observed)
    else:
        p_value = 1.0
    # The interval uses the untied distribution of n = all pairs (ranks 1..n).
    n = len(d)
    critical = _lower_critical(_sign_sum_distribution(list(range(1, n + 1))), level / 2)
    if critical is None:
        low, high = -math.inf, math.inf
    else:
        low, high = walsh[critical], walsh[len(walsh) - 1 - critical]
    return ShiftTest(
        "Wilcoxon signed-rank (exact), Hodges–Lehmann",
        n,
        estimate,
        low,
        high,
        p_value,
        level,
        signed_rank_min_p(len(nonzero)) if nonzero else 1.0,
    )


def mean_shift(values: Sequence[float], level: float = 0.05) -> ShiftTest:
    """One-sample t-test of H0 "the values have mean 0", two-sided, at `level`, with the mean
    and its t-interval at confidence 1 − `level`.

    Where the rank tests above ask whether values are symmetric about 0 (a location shift of a
    symmetric distribution), this asks about the mean itself: the soak's increments between
    windows sum to the growth over the soak, so their mean is the drift, and a skewed run of
    increments (many small rises, a few large releases) has mean 0 while its signed ranks lean
    upward. `min_p` is 0: any p-value is possible from 2 values on; fewer than 2 (or values
    that do not vary) give p = 1 and an infinite interval unless the mean is not 0.
    """
    from scipy import stats

    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        raise ValueError("the t-test needs at least one value")
    mean = float(x.mean())
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    if n < 2 or not math.isfinite(sd):
        return ShiftTest("t-test on the mean", n, mean, -math.inf, math.inf, 1.0, level, 1.0)
    if sd == 0:
        p_value = 1.0 if mean == 0 else 0.0
        return ShiftTest("t-test on the mean", n, mean, mean, mean, p_value, level, 0.0)
    se = sd / math.sqrt(n)
    t = mean / se
    p_value = float(2 * stats.t.sf(abs(t), n - 1))
    half = float(stats.t.ppf(1 - level / 2, n - 1)) * se
    return ShiftTest("t-test on the mean", n, mean, mean - half, mean + half, p_value, level, 0.0)


def mann_whitney(before: Sequence[float], after: Sequence[float], level: float = 0.05) -> ShiftTest:
    """Exact Mann–Whitney U (Wilcoxon rank-sum) test with the Hodges–Lehmann shift and Moses
    interval of `after` − `before`: the fallback when pairing breaks.

    Test: H0 "both samples come from one distribution", two-sided, at `level`. Ties get
    mid-ranks and the p-value is exact over all C(m+n, n) relabellings of those scores.
    Estimate: the median of all differences after_j − before_i. Interval: those differences at
    the U critical value (Moses), ±inf when 2/C(m+n, n) > `level` (`reachable` false).
    """
    x = [float(v) for v in before]
    y = [float(v) for v in after]
    if not x or not y:
        raise ValueError("the rank-sum test needs samples on both sides")
    m, n = len(x), len(y)
    diffs = sorted(b - a for a in x for b in y)
    estimate = float(np.median(diffs))
    scores = _doubled_midranks(x + y)
    observed = sum(scores[m:])
    p_value = _two_sided(_subset_sum_distribution(scores, n), observed)
    # U = rank-sum − n(n+1)/2; its untied null gives the interval's critical value.
    untied = _subset_sum_distribution(list(range(1, m + n + 1)), n)
    offset = n * (n + 1) // 2
    critical = _lower_critical(untied[offset:], level / 2)
    if critical is None:
        low, high = -math.inf, math.inf
    else:
        low, high = diffs[critical], diffs[len(diffs) - 1 - critical]
    return ShiftTest(
        "Mann–Whitney U (exact), Hodges–Lehmann",
        min(m, n),
        estimate,
        low,
        high,
        p_value,
        level,
        min(1.0, 2.0 / math.comb(m + n, n)),
    )


@dataclass(frozen=True)
class HolmStep:
    """One test's place in Holm's step-down: the level it was held to and its adjusted p."""

    index: int  # position in the input
    p_value: float
    level: float
    adjusted_p: float
    rejected: bool


def holm(p_values: Sequence[float], alpha: float) -> list[HolmStep]:
    """Holm's step-down over m tests at family-wise `alpha`, in input order.

    The k-th smallest p-value (k from 0) is held to alpha/(m−k); the first one that misses its
    level stops the procedure, and every later test is held to that same stopping level (so an
    interval built at a test's level agrees with its rejection). Adjusted p-values are the
    running maximum of (m−k)·p, capped at 1.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    steps: dict[int, HolmStep] = {}
    stopped: float | None = None
    running = 0.0
    for k, index in enumerate(order):
        p = p_values[index]
        running = max(running, min(1.0, (m - k) * p))
        level = alpha / (m - k) if stopped is None else stopped
        rejected = stopped is None and p <= level
        if stopped is None and not rejected:
            stopped = level
        steps[index] = HolmStep(index, p, level, running, rejected)
    return [steps[i] for i in range(m)]


def look_alphas(alpha: float, looks: int) -> tuple[float, ...]:
    """The α spent at each of `looks` planned looks: an even split (a Bonferroni bound over the
    looks, so stopping early or adding pairs never inflates the false-alarm rate above alpha)."""
    if looks < 1:
        raise ValueError("at least one look")
    return tuple(alpha / looks for _ in range(looks))


def look_points(planned: Sequence[int], completed: int) -> list[int]:
    """The looks that happened: the planned ones reached, plus a last look at `completed` when
    the data stopped early (a time budget, a crash); that look spends the next look's α."""
    points = [n for n in planned if n <= completed]
    if completed > 0 and completed not in points and len(points) < len(planned):
        points.append(completed)
    return points


def first_holm_level(alpha: float, tests: int, looks: int) -> float:
    """The smallest level any test is held to: the first Holm step at the first look."""
    return look_alphas(alpha, looks)[0] / max(tests, 1)


def min_pairs(level: float) -> int:
    """The fewest pairs with which the exact two-sided signed-rank test can reach `level`:
    the smallest n with 2/2^n ≤ level (e.g. 0.00625 → 9, because 8 pairs give at best 0.0078)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n = 1
    while signed_rank_min_p(n) > level:
        n += 1
    return n


def planned_looks(first: int, maximum: int, looks: int) -> tuple[int, ...]:
    """Pair counts at which the data are looked at: `first`, then evenly up to `maximum`.

    Fixed before the first pair runs, so the schedule cannot chase the data.
    """
    last = max(first, maximum)
    if looks <= 1 or last == first:
        return (last,) if looks <= 1 else (first,)
    points = [round(first + (last - first) * i / (looks - 1)) for i in range(looks)]
    return tuple(sorted(set(points)))


def geometric_mean(ratios: Sequence[float]) -> float:
    """The geometric mean of ratios (context across tests, never gated)."""
    if not ratios:
        return math.nan
    return math.exp(statistics.fmean(math.log(r) for r in ratios))


def robust_sd(values: Sequence[float]) -> float:
    """1.4826 × the median absolute deviation: the SD of normal data, robust to an outlier."""
    if len(values) < 2:
        return 0.0
    centre = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - centre) for v in values)
