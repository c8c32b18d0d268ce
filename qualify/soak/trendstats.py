"""Small pure statistics for drift over time: Mann–Kendall with the Hamed–Rao correction and the
Theil–Sen slope with Sen's interval.

Like `qualify.stats.abtests`, nothing here returns a bare "significant" bool: each test gives its
statistic, effect size, interval and p-value, with the level it was held to and whether the
number of points can reach that level at all. Series are short (window medians of a soak, tens
to hundreds of points), so the O(n²) pairwise forms are used as written.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

_NORMAL = NormalDist()


@dataclass(frozen=True)
class TrendTest:
    """A Mann–Kendall trend test on one series.

    `variance_factor` is Hamed–Rao's n/n* (1 without correction); `reachable` is false when even
    a perfectly monotonic series of this length could not give p ≤ `level`.
    """

    method: str
    n: int
    s: int
    variance: float  # Var(S) after any correction
    variance_factor: float
    z: float
    p_value: float
    tau: float
    level: float
    min_p: float

    @property
    def reachable(self) -> bool:
        return self.min_p <= self.level

    @property
    def significant(self) -> bool:
        return self.reachable and self.p_value <= self.level


@dataclass(frozen=True)
class SenSlope:
    """A Theil–Sen slope (units of y per unit of t) with Sen's interval at `confidence`."""

    slope: float
    intercept: float
    low: float
    high: float
    confidence: float


def _sf(z: float) -> float:
    """Upper tail of the standard normal."""
    return 1.0 - _NORMAL.cdf(z) if z < 0 else _NORMAL.cdf(-z)


def _midranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _mk_score(values: Sequence[float] | np.ndarray) -> int:
    x = np.asarray(values, dtype=float)
    return int(sum(np.sign(x[i + 1 :] - x[i]).sum() for i in range(len(x) - 1)))


def _tie_term(values: Sequence[float]) -> float:
    return float(sum(t * (t - 1) * (2 * t + 5) for t in Counter(values).values() if t > 1))


def mk_variance(values: Sequence[float]) -> float:
    """Var(S) under H0 with the tie correction: [n(n−1)(2n+5) − Σ t(t−1)(2t+5)] / 18."""
    n = len(values)
    return (n * (n - 1) * (2 * n + 5) - _tie_term(values)) / 18.0


def _z(s: int, variance: float) -> float:
    if variance <= 0 or s == 0:
        return 0.0
    # The continuity correction moves S one step towards 0.
    return (s - 1) / math.sqrt(variance) if s > 0 else (s + 1) / math.sqrt(variance)


def mk_min_p(n: int) -> float:
    """The smallest two-sided p-value plain Mann–Kendall can give on n untied points (a
    perfectly monotonic series): 6 points are the fewest that can go below 0.01."""
    if n < 3:
        return 1.0
    s = n * (n - 1) // 2
    return 2 * _sf(_z(s, n * (n - 1) * (2 * n + 5) / 18.0))


def min_points(level: float) -> int:
    """The fewest points with which `mk_min_p` reaches `level` (e.g. 0.01 → 6)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n = 3
    while mk_min_p(n) > level:
        n += 1
    return n


def _acf(values: np.ndarray, lags: int) -> np.ndarray:
    """Sample autocorrelations 0..lags with the biased (1/n) autocovariance."""
    y = values - values.mean()
    n = len(values)
    acov = np.correlate(y, y, "full")[n - 1 :] / n
    if acov[0] == 0:
        return np.zeros(lags + 1)
    result: np.ndarray = acov[: lags + 1] / acov[0]
    return result


def mann_kendall(values: Sequence[float], level: float = 0.01, *, hamed_rao: bool = True) -> TrendTest:
    """Mann–Kendall trend test, two-sided, at `level`, with the Hamed–Rao (1998) correction.

    Test: H0 "no monotonic trend". S = Σ_{i<j} sgn(x_j − x_i); Var(S) with the tie correction;
    Z with the continuity correction; p = 2(1 − Φ(|Z|)); τ = S / (n(n−1)/2).

    Hamed–Rao: the series is detrended by its Sen slope (on the index), ranked, and every
    autocorrelation of the ranks outside ±Φ⁻¹(1 − level/2)/√n adds (n−i)(n−i−1)(n−i−2)ρᵢ to
    Σ; Var(S) is multiplied by n/n* = 1 + 2Σ / (n(n−1)(n−2)). Serially correlated samples (one
    window's median leaning on the last) otherwise make plain MK far too eager. This follows
    `pymannkendall.hamed_rao_modification_test` (all lags, significance at `level`), against
    which it is tested. A factor ≤ 0 (possible with strongly negative autocorrelation) falls
    back to 1: the plain test.

    Fallback: with fewer points than `min_points(level)` the test cannot reach `level`;
    `reachable` is false and the caller must say the series is too short, not "no trend".
    """
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 3:
        return TrendTest("Mann–Kendall", n, 0, 0.0, 1.0, 0.0, 1.0, 0.0, level, 1.0)
    s = _mk_score(x)
    variance = mk_variance(list(x))
    factor = 1.0
    method = "Mann–Kendall"
    if hamed_rao:
        method = "Mann–Kendall, Hamed–Rao corrected"
        slope = theil_sen(np.arange(n, dtype=float), x).slope
        ranks = _midranks(x - np.arange(1, n + 1) * slope)
        acf = _acf(ranks, n - 1)
        bound = _NORMAL.inv_cdf(1 - level / 2) / math.sqrt(n)
        total = sum((n - i) * (n - i - 1) * (n - i - 2) * acf[i] for i in range(1, n) if abs(acf[i]) > bound)
        factor = 1 + 2 * total / (n * (n - 1) * (n - 2))
        if factor <= 0:
            factor = 1.0
    variance *= factor
    z = _z(s, variance)
    p_value = 2 * _sf(abs(z))
    return TrendTest(method, n, s, variance, factor, z, p_value, s / (n * (n - 1) / 2), level, mk_min_p(n))


def theil_sen(
    t: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    *,
    variance_factor: float = 1.0,
) -> SenSlope:
    """Theil–Sen slope: the median of (y_j − y_i)/(t_j − t_i) over pairs with t_j > t_i, and
    Sen's (1968) distribution-free interval at `confidence`.

    Interval: with N slopes sorted and σ² = Var(S) of Kendall's S with ties in t and in y
    (Sen's eq. 2.6), the bounds are the slopes at ranks round((N ∓ z·σ)/2) — as
    `scipy.stats.theilslopes` computes them, against which it is tested. `variance_factor`
    widens σ² by Hamed–Rao's n/n* for serially correlated points (1: Sen's interval as
    published). Intercept: median(y) − slope·median(t).

    Fallback: fewer than two distinct times gives NaN everywhere (no slope exists).
    """
    tt = np.asarray(t, dtype=float)
    yy = np.asarray(y, dtype=float)
    if len(tt) != len(yy):
        raise ValueError("t and y differ in length")
    dt = tt[:, None] - tt[None, :]
    dy = yy[:, None] - yy[None, :]
    mask = dt > 0
    if not mask.any():
        nan = math.nan
        return SenSlope(nan, nan, nan, nan, confidence)
    slopes = np.sort(dy[mask] / dt[mask])
    slope = float(np.median(slopes))
    intercept = float(np.median(yy) - slope * np.median(tt))
    n = len(yy)
    sigma2 = (n * (n - 1) * (2 * n + 5) - _tie_term(list(tt)) - _tie_term(list(yy))) / 18.0
    z = _NORMAL.inv_cdf(1 - (1 - confidence) / 2)
    sigma = math.sqrt(max(sigma2 * variance_factor, 0.0))
    count = len(slopes)
    upper = min(round((count + z * sigma) / 2), count - 1)
    lower = max(round((count - z * sigma) / 2) - 1, 0)
    return SenSlope(slope, intercept, float(slopes[lower]), float(slopes[upper]), confidence)
