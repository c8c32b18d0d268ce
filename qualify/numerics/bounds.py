"""The bounds the numerics stage judges, and the guards that keep them at their confidence where
the bootstrap alone falls short.

`qualify.numerics.bootstrap` gives a BCa bound for any statistic of chunk multiplicities. Two
cases are known to undercover, measured on seeded simulations (`benchmarks/calibration.py`):
- rare counts (confident flips; 100 % top-1 agreement): with about one expected event the
  resamples mostly equal the estimate and the percentile bound collapses onto it. The exact
  bound for a count (Poisson, Clopper–Pearson) holds however few events there are; the more
  conservative of the two is judged (`with_exact`);
- heavy-tailed chunks: at 32 chunks whose means are lognormal with σ = 1.5, the 95 % BCa bound
  covered 82 %, and non-inferiority with the truth on its margin passed up to 19 % of the time.
  Every per-token mean is judged on the wider of BCa and Cantelli's distribution-free bound
  (`cantelli_guarded`, `mean_bound`), whatever the sample's shape.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from qualify.numerics.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    BootstrapBound,
    CountsStatistic,
    PooledPercentile,
    RatioOfSums,
    Side,
    Transformed,
    bca_bound,
)
from qualify.numerics.tokenstats import DEFAULT_FLIP_MARGIN, TokenStats


def exact_bound(
    family: Literal["poisson", "binomial"],
    events: int,
    trials: int,
    scale: float,
    side: Side,
    confidence: float,
) -> float:
    """The exact one-sided bound on scale × rate: Poisson (chi-square form) or Clopper–Pearson."""
    from scipy import stats

    if family == "poisson":
        if side == "upper":
            return float(scale * stats.chi2.ppf(confidence, 2 * events + 2) / 2 / trials)
        return float(scale * stats.chi2.ppf(1 - confidence, 2 * events) / 2 / trials) if events else 0.0
    if side == "lower":
        return float(scale * stats.beta.ppf(1 - confidence, events, trials - events + 1)) if events else 0.0
    return (
        float(scale * stats.beta.ppf(confidence, events + 1, trials - events)) if events < trials else scale
    )


def with_exact(
    bound: BootstrapBound, family: Literal["poisson", "binomial"], events: int, trials: int, scale: float
) -> BootstrapBound:
    """`bound` made at least as conservative as the exact bound on a count."""
    exact = exact_bound(family, events, trials, scale, bound.side, bound.confidence)
    worse = max(bound.bound, exact) if bound.side == "upper" else min(bound.bound, exact)
    return replace(bound, bound=worse, method="BCa+exact", exact=(family, events, trials, scale))


def long_run_sd(values: npt.NDArray[np.float64]) -> tuple[float, int]:
    """(SD, lag window): the standard deviation that makes √c times a mean's standard error for
    `values` in their order, never less than their plain sample SD, and the lags it summed.

    Chunks of one long document are alike, so the chunk differences are autocorrelated in
    corpus order and the plain SD understates the mean's error: with lag-1 correlation φ 0.8
    (AR(1)) the mean of c chunks varies (1 + φ)/(1 − φ) = 9 times as much as c independent ones.
    The Newey–West estimate sums the sample autocovariances up to a lag window with Bartlett
    weights (1 − k/(L + 1)), which keeps it positive; L comes from Andrews' AR(1) plug-in,
    1.1447·(4ρ̂²c/((1 − ρ̂)²(1 + ρ̂)²))^⅓ with ρ̂ the lag-1 autocorrelation, capped at c/3: about 0
    for independent chunks (the plain SD, no power lost), about 11 at φ 0.8 and 48 chunks. It is
    not less than the plain SD even where the chunks alternate (negative autocorrelation), so a
    bound is never narrowed by it."""
    c = len(values)
    centred = values - values.mean()
    gamma0 = float(centred @ centred) / c
    plain = math.sqrt(gamma0 * c / (c - 1)) if c > 1 else 0.0
    if c < 4 or gamma0 == 0:
        return plain, 0
    rho = float(np.clip(centred[1:] @ centred[:-1] / c / gamma0, -0.97, 0.97))
    a = 4 * rho * rho / ((1 - rho) ** 2 * (1 + rho) ** 2)
    window = min(int(1.1447 * (a * c) ** (1 / 3)), c // 3)
    variance = gamma0
    for k in range(1, window + 1):
        variance += 2 * (1 - k / (window + 1)) * float(centred[k:] @ centred[:-k]) / c
    return max(plain, math.sqrt(max(variance, 0.0) * c / (c - 1))), window


def cantelli_guarded(
    bound: BootstrapBound, statistic: RatioOfSums, *, confidence: float | None = None, stretch: float = 1.0
) -> BootstrapBound:
    """`bound`, made at least as conservative as Cantelli's one-sided inequality, always.

    Cantelli: P(θ̂ − θ ≤ −k·se) ≤ 1/(1 + k²) for any distribution with that standard error, so
    θ̂ + √(1/α − 1)·se is an upper bound at 1 − α without assuming a shape (4.36 se at 95 %),
    se from the chunks' linearised values (S_c − θ̂ n_c). BCa alone is about 1.7–2.5 se from
    the estimate and undercovers on heavy-tailed chunks (lognormal chunk means of σ 1.5: 82 %
    at 32 chunks, 86 % at 100), and non-inferiority judged on it passed 15–19 % of data sets
    with the truth on the margin when the per-chunk differences were heavy-tailed. Judged only
    where the chunks' sample skewness exceeded 0.5, it still passed 11–12 % of them: a sample
    that has not yet drawn the tail does not look skewed, so the guard now hinges on no sample
    statistic. Its cost: the bound is 2.6× as far from the estimate as BCa's on near-normal
    chunks, 2.3–3.0× on heavy-tailed ones, so non-inferiority needs more chunks to pass
    (`benchmarks/calibration.py` prints both). The sample skewness is kept in `guard`.

    se is the chunks' long-run SD (`long_run_sd`) over √c, in corpus order: chunks of a few long
    documents are autocorrelated, and the plain SD then understates the error of their mean
    (near-normal chunks with AR(1) φ 0.8 differences passed non-inferiority in 9.3 % of data
    sets with the truth on the margin, and the mean-KLD bound covered 88.6 %). The BCa bound
    resamples chunks as if independent; the guard, at least as wide, is what holds the rate
    there. σ is estimated, where Cantelli's inequality assumes it known: at 48 chunks the
    estimate's own error is absorbed by the inequality's slack on near-normal chunks (4.36 se
    where a normal bound needs 1.64), and `benchmarks/calibration.py` measures what is left.

    In looks (`qualify.numerics.looks`), `stretch` = √(N/n) at a look of n chunks of N planned
    makes it hold at every look at once: by the one-sided Kolmogorov–Cantelli maximal
    inequality, P(max over n ≤ N of the centred sum of n chunks ≥ ε) ≤ σ²N/(σ²N + ε²), so with
    ε = k·σ·√N the bound at each look is θ̂ + k·se·√(N/n) at `confidence` (the plan's, not
    split over the looks) and the last look's is the single look's."""
    sums, sizes = statistic.sums, statistic.sizes
    c = len(sums)
    if c < 3 or sizes.sum() <= 0:
        return bound
    theta = float(sums.sum() / sizes.sum())
    r = (sums - theta * sizes) / sizes.mean()
    sd, _window = long_run_sd(r)
    if sd == 0:
        return bound
    skew = float(c / ((c - 1) * (c - 2)) * (((r - r.mean()) / sd) ** 3).sum())
    se = statistic.scale * sd / math.sqrt(c) * stretch
    k = math.sqrt(1 / (1 - (confidence or bound.confidence)) - 1)
    cantelli = bound.estimate + k * se if bound.side == "upper" else bound.estimate - k * se
    worse = max(bound.bound, cantelli) if bound.side == "upper" else min(bound.bound, cantelli)
    return replace(bound, bound=worse, method="BCa+Cantelli", guard=(skew, se))


def mean_bound(
    statistic: RatioOfSums,
    n_units: int,
    *,
    side: Side,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    name: str = "",
    guard_confidence: float | None = None,
    stretch: float = 1.0,
) -> BootstrapBound:
    """The bound judged on a per-token mean: BCa over chunks at `confidence`, at least as wide as
    Cantelli's at `guard_confidence` (default: the same), stretched for looks (`cantelli_guarded`)."""
    bound = bca_bound(
        statistic, n_units, side=side, confidence=confidence, n_resamples=n_resamples, seed=seed, name=name
    )
    return cantelli_guarded(bound, statistic, confidence=guard_confidence, stretch=stretch)


def _ratio(stats: TokenStats, values: npt.ArrayLike, scale: float = 1.0) -> RatioOfSums:
    return RatioOfSums(stats.chunk_sums(values), stats.chunk_sizes().astype(np.float64), scale)


def judged_bounds(
    stats: TokenStats,
    role: str,
    *,
    margin: float = DEFAULT_FLIP_MARGIN,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    guard_confidence: float | None = None,
    stretch: float = 1.0,
) -> dict[str, BootstrapBound]:
    """Bounds on ``role`` against the reference, named like the limits they are judged by:
    mean_kld, p99_kld, abs_dppl_pct, confident_flips (per 100 000 tokens): upper;
    top1_agreement: lower. abs_dppl_pct is over the tokens whose target is above a llama.cpp
    file's floor in both roles (all tokens for other formats)."""
    ref = stats.reference
    kld = stats.kld(ref, role)
    # A target stored at a llama.cpp file's floor has only a lower bound for its NLL: such tokens
    # (in either role) are left out of |ΔPPL| rather than let a clamp decide the difference.
    kept = ~(stats.role[role].target_at_floor | stats.role[ref].target_at_floor)
    dnll = np.where(kept, stats.role[role].nll - stats.role[ref].nll, 0.0)
    dppl = RatioOfSums(stats.chunk_sums(dnll), stats.chunk_sums(kept))
    statistics: dict[str, tuple[CountsStatistic, Side]] = {
        "mean_kld": (_ratio(stats, kld), "upper"),
        "p99_kld": (PooledPercentile(kld, stats.unit(), 0.99), "upper"),
        "top1_agreement": (_ratio(stats, stats.top1_agreement(role)), "lower"),
        "abs_dppl_pct": (Transformed(dppl, lambda t: np.abs(100 * np.expm1(t))), "upper"),
        "confident_flips": (_ratio(stats, stats.confident_flips(role, margin), 1e5), "upper"),
    }
    bounds = {
        name: bca_bound(
            s, stats.n_chunks, side=side, confidence=confidence, n_resamples=n_resamples, seed=seed, name=name
        )
        for name, (s, side) in statistics.items()
    }
    for name in ("mean_kld", "top1_agreement"):
        ratio = statistics[name][0]
        assert isinstance(ratio, RatioOfSums)
        bounds[name] = cantelli_guarded(bounds[name], ratio, confidence=guard_confidence, stretch=stretch)
    tokens = int(stats.chunk_sizes().sum())
    flips = int(stats.confident_flips(role, margin).sum())
    agree = int(stats.top1_agreement(role).sum())
    bounds["confident_flips"] = with_exact(bounds["confident_flips"], "poisson", flips, tokens, 1e5)
    bounds["top1_agreement"] = with_exact(bounds["top1_agreement"], "binomial", agree, tokens, 1.0)
    return bounds


def noninferiority_bound(
    stats: TokenStats,
    candidate: str,
    pinned: str,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> BootstrapBound:
    """Upper bound on θ = Σ_c S_c / Σ_c n_c, S_c = Σ over chunk c of KL_candidate - KL_pinned
    (both against the reference); the stage passes it when the bound is at most its margin δ."""
    d = stats.kld(stats.reference, candidate) - stats.kld(stats.reference, pinned)
    return mean_bound(
        _ratio(stats, d),
        stats.n_chunks,
        side="upper",
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        name="noninferiority",
    )
