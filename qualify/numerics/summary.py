"""llama-perplexity's ``--kl-divergence`` summary of a pair of roles, from per-token vectors.

Summary figures follow llama-perplexity: mean ± sqrt((m(x²) - m(x)²)/(N-1)) (0 when N <= 10),
percentiles by linear interpolation at f·(N-1) on the sorted values (the median is the mean of
the two middle values for even N, the same rule), PPL = exp(m(nll)), ΔPPL % = 100·(PPL(Q)/PPL(B)
- 1), RMS Δp = sqrt(m(Δp²)), same-top p = n_same/N ± sqrt(p(1-p)/(N-1)). Every ± there assumes
independent tokens; chunk-level uncertainty is ``qualify.numerics.bootstrap``'s job.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from qualify.numerics.tokenstats import DEFAULT_FLIP_MARGIN, TokenStats

KLD_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("Maximum", 1.0), ("99.9%", 0.999), ("99.0%", 0.99), ("95.0%", 0.95), ("90.0%", 0.9), ("Median", 0.5),
    ("10.0%", 0.1), ("5.0%", 0.05), ("1.0%", 0.01), ("0.1%", 0.001), ("Minimum", 0.0),
)  # fmt: skip
DP_PERCENTILES: tuple[tuple[str, float], ...] = (
    ("Maximum", 1.0), ("99.9%", 0.999), ("99.0%", 0.99), ("95.0%", 0.95), ("90.0%", 0.9), ("75.0%", 0.75),
    ("Median", 0.5), ("25.0%", 0.25), ("10.0%", 0.1), ("5.0%", 0.05), ("1.0%", 0.01), ("0.1%", 0.001),
    ("Minimum", 0.0),
)  # fmt: skip


def mean_and_uncertainty(x: npt.ArrayLike) -> tuple[float, float]:
    """llama-perplexity's mean ± sqrt((m(x²) - m(x)²)/(N-1)), the ± 0 when N <= 10."""
    v = np.asarray(x, np.float64)
    if v.size < 1:
        return 0.0, 0.0
    f = float(v.mean())
    var = float((v * v).mean()) - f * f
    return f, math.sqrt(var / (v.size - 1)) if var > 0 and v.size > 10 else 0.0


def llama_percentile(sorted_values: npt.ArrayLike, fraction: float) -> float:
    """Linear interpolation at fraction·(N-1) of sorted values (numpy's 'linear' rule)."""
    v = np.asarray(sorted_values, np.float64)
    if fraction <= 0:
        return float(v[0])
    if fraction >= 1:
        return float(v[-1])
    p = fraction * (v.size - 1)
    ip = int(p)
    p -= ip
    return float((1 - p) * v[ip] + p * v[min(ip + 1, v.size - 1)])


@dataclass(frozen=True)
class KldSummary:
    """A pair (base, other)'s figures, named and defined as llama-perplexity prints them (Q = other)."""

    base: str
    other: str
    n_tokens: int
    n_chunks: int
    ppl_q: float
    ppl_q_unc: float
    ppl_base: float
    ppl_base_unc: float
    cor_ln_ppl: float
    ln_ppl_ratio: float
    ln_ppl_ratio_unc: float
    ppl_ratio: float
    ppl_ratio_unc: float
    ppl_diff: float
    ppl_diff_unc: float
    dppl_pct: float  # 100·(PPL(Q)/PPL(base) - 1)
    kld_mean: float
    kld_mean_unc: float
    kld_percentiles: Mapping[str, float]  # keyed like KLD_PERCENTILES
    dp_mean: float
    dp_mean_unc: float
    dp_percentiles: Mapping[str, float]
    rms_dp: float
    rms_dp_unc: float
    same_top_p: float
    same_top_p_unc: float
    dp_base_top_mean: float
    rms_dp_base_top: float
    flip_margin: float
    confident_flips: int
    confident_flips_per_1e5: float
    nonfinite_base: int
    nonfinite_other: int
    target_at_floor_base: int
    target_at_floor_other: int
    kld_lower_bound: bool

    @property
    def kld_median(self) -> float:
        return self.kld_percentiles["Median"]

    @property
    def kld_p90(self) -> float:
        return self.kld_percentiles["90.0%"]

    @property
    def kld_p99(self) -> float:
        return self.kld_percentiles["99.0%"]

    @property
    def kld_p999(self) -> float:
        return self.kld_percentiles["99.9%"]

    @property
    def kld_max(self) -> float:
        return self.kld_percentiles["Maximum"]

    def printed(self) -> dict[str, tuple[float, float | None]]:
        """llama-perplexity's summary lines (whitespace collapsed) -> (value, ±), in its units (%)."""
        out: dict[str, tuple[float, float | None]] = {
            "Mean PPL(Q)": (self.ppl_q, self.ppl_q_unc),
            "Mean PPL(base)": (self.ppl_base, self.ppl_base_unc),
            "Cor(ln(PPL(Q)), ln(PPL(base)))": (100 * self.cor_ln_ppl, None),
            "Mean ln(PPL(Q)/PPL(base))": (self.ln_ppl_ratio, self.ln_ppl_ratio_unc),
            "Mean PPL(Q)/PPL(base)": (self.ppl_ratio, self.ppl_ratio_unc),
            "Mean PPL(Q)-PPL(base)": (self.ppl_diff, self.ppl_diff_unc),
            "Mean KLD": (self.kld_mean, self.kld_mean_unc),
        }
        out |= {f"{name} KLD": (v, None) for name, v in self.kld_percentiles.items()}
        out["Mean Δp"] = (100 * self.dp_mean, 100 * self.dp_mean_unc)
        out |= {f"{name} Δp": (100 * v, None) for name, v in self.dp_percentiles.items()}
        out["RMS Δp"] = (100 * self.rms_dp, 100 * self.rms_dp_unc)
        out["Same top p"] = (100 * self.same_top_p, 100 * self.same_top_p_unc)
        return out


def summarize(stats: TokenStats, base: str, other: str, *, margin: float = DEFAULT_FLIP_MARGIN) -> KldSummary:
    """The pair's figures; confident flips use ``base``'s top-1/top-2 margin."""
    pv = stats.pair[(base, other)]
    rb, rq = stats.role[base], stats.role[other]
    n = stats.n_tokens
    if n < 2:
        raise ValueError(f"{n} scored token(s): too few for a summary")
    lq, se_q = mean_and_uncertainty(rq.nll)
    lb, se_b = mean_and_uncertainty(rb.nll)
    cov = float((rq.nll * rb.nll).mean() - lq * lb) / (n - 1) if n >= 10 else 0.0
    ppl_q, ppl_b = math.exp(lq), math.exp(lb)
    ln_ratio_unc = math.sqrt(max(se_q**2 + se_b**2 - 2 * cov, 0.0))
    ratio = math.exp(lq - lb)
    diff_unc = math.sqrt(max((ppl_q * se_q) ** 2 + (ppl_b * se_b) ** 2 - 2 * ppl_q * ppl_b * cov, 0.0))
    kld_mean, kld_unc = mean_and_uncertainty(pv.kld)
    dp_mean, dp_unc = mean_and_uncertainty(pv.dp_target)
    mse, mse_unc = mean_and_uncertainty(pv.dp_target**2)
    rms = math.sqrt(mse)
    same = float(pv.same_top.mean())
    flips = int((~pv.same_top & (rb.top_margin > margin)).sum())
    dp_top = pv.dp_base_top[np.isfinite(pv.dp_base_top)]
    kld_sorted, dp_sorted = np.sort(pv.kld), np.sort(pv.dp_target)
    return KldSummary(
        base=base,
        other=other,
        n_tokens=n,
        n_chunks=stats.n_chunks,
        ppl_q=ppl_q,
        ppl_q_unc=ppl_q * se_q,
        ppl_base=ppl_b,
        ppl_base_unc=ppl_b * se_b,
        cor_ln_ppl=cov / (se_q * se_b) if se_q * se_b > 0 else math.nan,
        ln_ppl_ratio=lq - lb,
        ln_ppl_ratio_unc=ln_ratio_unc,
        ppl_ratio=ratio,
        ppl_ratio_unc=ratio * ln_ratio_unc,
        ppl_diff=ppl_q - ppl_b,
        ppl_diff_unc=diff_unc,
        dppl_pct=100 * (ratio - 1),
        kld_mean=kld_mean,
        kld_mean_unc=kld_unc,
        kld_percentiles={name: llama_percentile(kld_sorted, f) for name, f in KLD_PERCENTILES},
        dp_mean=dp_mean,
        dp_mean_unc=dp_unc,
        dp_percentiles={name: llama_percentile(dp_sorted, f) for name, f in DP_PERCENTILES},
        rms_dp=rms,
        rms_dp_unc=0.5 / rms * mse_unc if rms > 0 else 0.0,
        same_top_p=same,
        same_top_p_unc=math.sqrt(same * (1 - same) / (n - 1)),
        dp_base_top_mean=float(dp_top.mean()) if dp_top.size else math.nan,
        rms_dp_base_top=float(np.sqrt((dp_top**2).mean())) if dp_top.size else math.nan,
        flip_margin=margin,
        confident_flips=flips,
        confident_flips_per_1e5=1e5 * flips / n,
        nonfinite_base=int(rb.nonfinite.sum()),
        nonfinite_other=int(rq.nonfinite.sum()),
        target_at_floor_base=int(rb.target_at_floor.sum()),
        target_at_floor_other=int(rq.target_at_floor.sum()),
        kld_lower_bound=stats.kld_lower_bound[(base, other)],
    )


def role_summaries(
    stats: TokenStats, *, margin: float = DEFAULT_FLIP_MARGIN
) -> dict[tuple[str, str], KldSummary]:
    """``summarize`` for every pair the statistics hold."""
    return {p: summarize(stats, *p, margin=margin) for p in stats.pair}
