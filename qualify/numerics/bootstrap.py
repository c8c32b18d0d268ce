"""Seeded BCa bootstrap over chunks: one-sided bounds on per-token statistics.

Tokens in a chunk share context and KV state, so they are not independent; chunks are. Every
statistic here is therefore a function of chunk *multiplicities*: a resample is a row of counts
w_c (how often chunk c was drawn, summing to C), and the statistic is evaluated on the multiset
of chunks it describes. That makes each statistic vectorised over a batch of resamples, and the
jackknife (leave one chunk out) is the same call with counts 1 - e_c.

Method (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, §14.3; the same as
``scipy.stats.bootstrap(method="BCa")``, which the tests check this against with identical
resamples):

- resamples: B rows of C chunk indices drawn uniformly with replacement from
  ``numpy.random.default_rng(seed)``, ``DRAW_BATCH`` rows per draw (so the draws do not depend
  on the memory budget), evaluated ``batch_size`` rows at a time;
- bias correction z0 = Φ⁻¹((#{θ* < θ̂} + #{θ* <= θ̂}) / 2B) (ties count half);
- acceleration a = Σ d³ / (6 (Σ d²)^{3/2}), d_i = mean(θ_(·)) - θ_(i) over the C jackknife values;
- a one-sided bound at confidence 1-α is the bootstrap quantile (linear interpolation) at level
  Φ(z0 + (z0 + z)/(1 - a (z0 + z))), z = Φ⁻¹(1-α) for an upper bound, Φ⁻¹(α) for a lower one.

Counts and heavy-tailed chunks, where BCa alone falls short, are guarded in `qualify.numerics.bounds`.

Fallback: if every resample gives θ̂ (e.g. no confident flip anywhere, or 100 % agreement), the
distribution is degenerate and the bootstrap bound is θ̂ itself, ``method="degenerate"``; for
the counts the exact bound then decides. The p-value of a bound against a limit inverts
the same BCa mapping.

Statistics: ``RatioOfSums`` (θ = Σ_c S_c / Σ_c n_c: mean KLD, top-1 agreement, flips per token,
the non-inferiority difference), ``PooledPercentile`` (llama-perplexity's percentile rule on the
pooled tokens of the resampled chunks: p99 KLD), ``Transformed`` (e.g. |ΔPPL %| from the ratio of
the NLL difference) and ``Difference`` (paired: both sides see the same resamples).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Side = Literal["upper", "lower"]

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95
DRAW_BATCH = 1000  # resample rows per random draw; fixed so results do not depend on memory
DEFAULT_MEMORY = 128 * 2**20  # bytes a batch of resamples may use while a statistic is evaluated
_NORMAL = NormalDist()


def _ndtr(x: float) -> float:
    return _NORMAL.cdf(x)


def _ndtri(p: float) -> float:
    return -math.inf if p <= 0 else math.inf if p >= 1 else _NORMAL.inv_cdf(p)


class CountsStatistic(Protocol):
    """A statistic of chunk multiplicities: counts [B, C] -> values [B]."""

    @property
    def bytes_per_resample(self) -> int: ...

    def __call__(self, counts: I64) -> F64: ...


@dataclass(frozen=True, eq=False)
class RatioOfSums:
    """θ = Σ_c w_c S_c / Σ_c w_c n_c: a per-token mean when S_c sums chunk c's n_c token values."""

    sums: F64
    sizes: F64
    scale: float = 1.0

    @property
    def bytes_per_resample(self) -> int:
        return 16 * len(self.sums)

    def __call__(self, counts: I64) -> F64:
        w = counts.astype(np.float64)
        out: F64 = self.scale * (w @ self.sums) / (w @ self.sizes)
        return out


@dataclass(frozen=True, eq=False)
class PooledPercentile:
    """The fraction-quantile (linear at f·(N*-1)) of all tokens of the resampled chunks."""

    values: F64  # [N] per-token values
    unit: I64  # [N] chunk number of each token
    fraction: float
    _order: I64 = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_order", np.argsort(self.values, kind="stable"))

    @property
    def bytes_per_resample(self) -> int:
        return 24 * len(self.values)

    def __call__(self, counts: I64) -> F64:
        v = self.values[self._order]
        # Token weights in sorted order; cum[:, j] = how many pooled tokens are <= the j-th value.
        cum = np.cumsum(counts[:, self.unit[self._order]], axis=1)
        total = cum[:, -1]
        p = self.fraction * (total - 1)
        lo = np.floor(p).astype(np.int64)
        frac = p - lo
        hi = np.minimum(lo + 1, total - 1)
        # The element of rank r (0-based) is the first sorted value whose cumulative weight exceeds r.
        at_lo = (cum <= lo[:, None]).sum(axis=1)
        at_hi = (cum <= hi[:, None]).sum(axis=1)
        out: F64 = (1 - frac) * v[at_lo] + frac * v[at_hi]
        return out


@dataclass(frozen=True, eq=False)
class Transformed:
    """fn(statistic): e.g. |100·(exp(θ) - 1)| for |ΔPPL %| from the mean NLL difference θ."""

    inner: CountsStatistic
    fn: Callable[[F64], F64]

    @property
    def bytes_per_resample(self) -> int:
        return self.inner.bytes_per_resample

    def __call__(self, counts: I64) -> F64:
        return self.fn(self.inner(counts))


@dataclass(frozen=True, eq=False)
class Difference:
    """a - b evaluated on the same resamples (a paired comparison)."""

    a: CountsStatistic
    b: CountsStatistic

    @property
    def bytes_per_resample(self) -> int:
        return self.a.bytes_per_resample + self.b.bytes_per_resample

    def __call__(self, counts: I64) -> F64:
        out: F64 = self.a(counts) - self.b(counts)
        return out


@dataclass(frozen=True, eq=False)
class BootstrapBound:
    """A one-sided bound: the point estimate, the bound, and how it was obtained."""

    name: str
    estimate: float
    bound: float
    side: Side
    confidence: float
    n_units: int
    n_resamples: int
    seed: int
    z0: float
    acceleration: float
    method: Literal["BCa", "degenerate", "BCa+exact", "BCa+Cantelli"]
    distribution: F64 = field(repr=False)  # sorted bootstrap values θ*
    #: The exact bound for a count: (family, events, trials, scale), θ = scale × events/trials.
    exact: tuple[Literal["poisson", "binomial"], int, int, float] | None = None
    #: (sample skewness, standard error) of the chunks when the bound was made at least Cantelli's.
    guard: tuple[float, float] | None = None

    def p_value(self, limit: float) -> float:
        """One-sided p-value of H0 "θ beyond limit" (θ >= limit for an upper bound, <= for a lower).

        It is the α at which this bound would equal ``limit``, by inverting the BCa mapping; its
        resolution is 1/(2B). ``bound <= limit`` (upper) holds exactly when p <= 1 - confidence,
        up to that resolution.
        """
        p = self._bootstrap_p(limit)
        if self.exact is not None:
            p = max(p, _exact_p(self.exact, self.side, limit))
        if self.guard is not None:
            k = (limit - self.estimate if self.side == "upper" else self.estimate - limit) / self.guard[1]
            p = max(p, 1 / (1 + k * k) if k > 0 else 1.0)
        return p

    def _bootstrap_p(self, limit: float) -> float:
        if float(np.ptp(self.distribution)) == 0:  # degenerate: the bootstrap's bound is θ̂ itself
            at = float(self.distribution[0])
            return 0.0 if (at <= limit if self.side == "upper" else at >= limit) else 1.0
        b = len(self.distribution)
        below = np.searchsorted(self.distribution, limit, "left")
        at_or_below = np.searchsorted(self.distribution, limit, "right")
        level = min(max((below + at_or_below) / (2 * b), 0.5 / b), 1 - 0.5 / b)
        w = _ndtri(level) - self.z0
        denom = 1 + self.acceleration * w
        y = w / denom if denom > 0 else math.copysign(math.inf, w)
        z = y - self.z0 if self.side == "upper" else self.z0 - y
        return _ndtr(-z)


def _exact_p(exact: tuple[str, int, int, float], side: Side, limit: float) -> float:
    """One-sided p of H0 "θ beyond limit" for a count (the smallest α whose exact bound passes)."""
    from scipy import stats

    family, events, trials, scale = exact
    rate = limit / scale
    if family == "poisson":
        mean = rate * trials
        return float(
            stats.poisson.cdf(events, mean) if side == "upper" else stats.poisson.sf(events - 1, mean)
        )
    rate = min(max(rate, 0.0), 1.0)
    if side == "upper":
        return float(stats.binom.cdf(events, trials, rate))
    return float(stats.binom.sf(events - 1, trials, rate))


def _evaluate(statistic: CountsStatistic, counts: I64, batch_size: int) -> F64:
    return np.concatenate([statistic(counts[i : i + batch_size]) for i in range(0, len(counts), batch_size)])


def bca_bound(
    statistic: CountsStatistic,
    n_units: int,
    *,
    side: Side,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    name: str = "",
    memory: int = DEFAULT_MEMORY,
) -> BootstrapBound:
    """One-sided BCa bound of ``statistic`` over ``n_units`` resampled chunks."""
    if n_units < 2:
        raise ValueError(f"a bootstrap over chunks needs at least 2 chunks, got {n_units}")
    if not 0.5 < confidence < 1:
        raise ValueError(f"confidence must be in (0.5, 1), got {confidence}")
    batch_size = max(1, memory // max(1, statistic.bytes_per_resample))
    estimate = float(statistic(np.ones((1, n_units), np.int64))[0])
    rng = np.random.default_rng(seed)
    rows = np.arange(DRAW_BATCH)[:, None] * n_units
    parts = []
    for start in range(0, n_resamples, DRAW_BATCH):
        m = min(DRAW_BATCH, n_resamples - start)
        idx = rng.integers(0, n_units, size=(m, n_units))
        counts = np.bincount((idx + rows[:m]).ravel(), minlength=m * n_units).reshape(m, n_units)
        parts.append(_evaluate(statistic, counts, batch_size))
    theta = np.sort(np.concatenate(parts))
    if not np.isfinite(theta).all() or not math.isfinite(estimate):
        raise ValueError(f"{name or 'statistic'}: not finite on some resamples (NaN/Inf in the inputs?)")

    def result(bound: float, z0: float, accel: float, method: Literal["BCa", "degenerate"]) -> BootstrapBound:
        return BootstrapBound(
            name, estimate, bound, side, confidence, n_units, n_resamples, seed, z0, accel, method, theta
        )

    if theta[0] == theta[-1] == estimate:
        return result(estimate, 0.0, 0.0, "degenerate")
    below, at_or_below = np.searchsorted(theta, estimate, "left"), np.searchsorted(theta, estimate, "right")
    z0 = _ndtri(float(below + at_or_below) / (2 * len(theta)))
    leave_one_out = np.ones((n_units, n_units), np.int64) - np.eye(n_units, dtype=np.int64)
    jack = _evaluate(statistic, leave_one_out, batch_size)
    d = jack.mean() - jack
    den = float((d**2).sum())
    accel = float((d**3).sum()) / (6 * den**1.5) if den > 0 else 0.0
    z = _ndtri(confidence if side == "upper" else 1 - confidence)
    # θ̂ outside every resample (z0 infinite), or an acceleration so large that the mapping passes
    # its pole, puts the bound at the matching end of the bootstrap distribution.
    pole = 1 - accel * (z0 + z)
    level = _ndtr(z0 + (z0 + z) / pole) if math.isfinite(z0) and pole > 0 else float(z0 + z > 0)
    bound = float(np.quantile(theta, level))
    return result(bound, z0, accel, "BCa")
