"""Small pure statistics for drift over time: Mann–Kendall corrected for autocorrelated points
and the Theil–Sen slope with Sen's interval, widened by the same factor.

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
from typing import Literal

import numpy as np

_NORMAL = NormalDist()

Correction = Literal["ar1", "hamed-rao", "none"]
#: The one-sided 95 % normal quantile: φ is taken at its upper 95 % confidence bound.
AR1_Z = 1.6448536269514722
AR1_CAP = 0.95


@dataclass(frozen=True)
class TrendTest:
    """A Mann–Kendall trend test on one series.

    `variance_factor` is the correction's n/n* (1 without correction); `reachable` is false when even
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


def mk_min_p(n: int, variance_factor: float = 1.0) -> float:
    """The smallest two-sided p-value Mann–Kendall can give on n untied points (a perfectly
    monotonic series) with Var(S) widened by `variance_factor`: without correction, 6 points
    are the fewest that can go below 0.01; strongly autocorrelated windows need more."""
    if n < 3:
        return 1.0
    s = n * (n - 1) // 2
    return 2 * _sf(_z(s, variance_factor * n * (n - 1) * (2 * n + 5) / 18.0))


def min_points(level: float, variance_factor: float = 1.0) -> int:
    """The fewest points with which `mk_min_p` reaches `level` (e.g. 0.01 → 6 uncorrected)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n = 3
    while mk_min_p(n, variance_factor) > level:
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


def ar1_variance_factor(values: Sequence[float] | np.ndarray, *, z: float = AR1_Z) -> tuple[float, float]:
    """(n/n*, φ) for a series whose noise is AR(1): φ is an upper confidence bound on the lag-1
    autocorrelation of the series detrended by its Sen slope, and n/n* = (1 + φ)/(1 − φ).

    Why an upper bound: the sample lag-1 autocorrelation of a short series is biased low
    (about −(1 + 3φ)/n, Kendall 1954) and noisy, and a φ guessed too low is exactly what
    makes a trend test reject a trendless series too often. The estimate is corrected for that
    bias and raised by `z` of its standard error √((1 − φ²)/n); negative values count as 0
    (independent windows), and φ is capped at 0.95.
    """
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 3:
        return 1.0, 0.0
    slope = theil_sen(np.arange(n, dtype=float), x).slope
    detrended = x - slope * np.arange(n)
    r1 = float(_acf(detrended, 1)[1]) if np.ptp(detrended) > 0 else 0.0
    phi = r1 + (1 + 3 * r1) / n
    phi = min(max(phi + z * math.sqrt(max(1 - phi * phi, 0.0) / n), 0.0), AR1_CAP)
    return (1 + phi) / (1 - phi), phi


def mann_kendall(
    values: Sequence[float], level: float = 0.01, *, correction: Correction = "ar1"
) -> TrendTest:
    """Mann–Kendall trend test, two-sided, at `level`, with the Hamed–Rao (1998) correction.

    Test: H0 "no monotonic trend". S = Σ_{i<j} sgn(x_j − x_i); Var(S) with the tie correction;
    Z with the continuity correction; p = 2(1 − Φ(|Z|)); τ = S / (n(n−1)/2).

    Corrections for serially correlated points (one window's median leaning on the last, which
    otherwise makes plain MK far too eager):
    - "ar1" (what the soak uses): Var(S) times `ar1_variance_factor`. On seeded AR(1) series
      (φ 0 to 0.8, 12 to 96 points) it holds the nominal level, where Hamed–Rao rejected
      trendless AR(1) series at 6–10 % (φ 0.5) and 12–24 % (φ 0.8) for a nominal 1 %
      (`benchmarks/calibration.py` prints the table).
    - "hamed-rao": the series is detrended by its Sen slope (on the index), ranked, and every
      autocorrelation of the ranks outside ±Φ⁻¹(1 − level/2)/√n adds (n−i)(n−i−1)(n−i−2)ρᵢ to
      Σ; Var(S) is multiplied by n/n* = 1 + 2Σ / (n(n−1)(n−2)). This follows
      `pymannkendall.hamed_rao_modification_test` (all lags, significance at `level`), against
      which it is tested. A factor ≤ 0 (possible with strongly negative autocorrelation) falls
      back to 1: the plain test.
    - "none": plain Mann–Kendall.

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
    if correction == "ar1":
        factor, phi = ar1_variance_factor(x)
        method = f"Mann–Kendall, AR(1) corrected (φ ≤ {phi:.2f})"
    elif correction == "hamed-rao":
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
    # Reachable only if a perfectly monotonic series with this correction could reach `level`.
    min_p = mk_min_p(n, factor)
    return TrendTest(method, n, s, variance, factor, z, p_value, s / (n * (n - 1) / 2), level, min_p)


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
    widens σ² by the trend test's n/n* for serially correlated points (1: Sen's interval as
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
