"""Drift over a soak, decided from saved time series: windows, trend tests, the leak rule.

Every series is cut to the time after the warm-up, aggregated into fixed windows (medians of
telemetry samples; p50 and p99 of the requests that ended in the window), and tested per role:
Mann–Kendall corrected for the windows' AR(1) autocorrelation and a t-test of the mean of the
increments between windows (`Trend`), with the Theil–Sen slope and Sen's interval widened by the
same factor (`qualify.soak.trendstats`), intersected with the increments' interval.

The leak rule: a candidate's series is a leak, or a latency drift, when all three hold:
1. it rises significantly (either test, each at half its level), at its Holm level among the
   budgeted series judged together, ordered by `Trend.p_value` (`alpha` bounds the chance of
   calling any trendless series a trend);
2. the Theil–Sen lower bound × the horizon exceeds the plan's budget for that series;
3. its slope exceeds the pinned role's slope by more than the margin — read strictly: the
   lower bound of the candidate's slope lies above the upper bound of pinned's by the margin.
A series too short for Mann–Kendall to reach alpha in either role cannot decide anything:
the soak is then too short, which is INCONCLUSIVE, never PASS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from qualify.soak.trendstats import SenSlope, TrendTest, mann_kendall, min_points, theil_sen
from qualify.stats.abtests import ShiftTest, mean_shift, signed_rank_min_p

MIB = 1024**2
HOUR = 3600.0
#: Confidence of the Theil–Sen interval (as scipy.stats.theilslopes by default).
CONFIDENCE = 0.95

LEAK, GROWS_LIKE_PINNED, TOO_SHORT, NO_LEAK = "leak", "grows like pinned", "too short", "no leak"


@dataclass(frozen=True)
class SeriesRule:
    """A series the judge follows, in display units, and the limits that apply to it."""

    name: str
    label: str
    unit: str
    budget: str | None  # limit name: the most growth allowed over the horizon
    margin: str  # limit name: the most the candidate's slope may exceed pinned's (unit per hour)
    kind: str  # "memory" or "latency"


MEMORY_RULES = (
    # The leak budget applies to anonymous memory: a memory-mapped model file grows RSS while
    # its pages are first read, which is not a leak (RSS and PSS are shown, not judged).
    SeriesRule("anon_mib", "server anonymous memory", "MiB", "max_rss_growth_mib", "leak_margin", "memory"),
    SeriesRule("rss_mib", "server RSS", "MiB", None, "leak_margin", "memory"),
    SeriesRule("pss_mib", "server PSS", "MiB", None, "leak_margin", "memory"),
    SeriesRule("gpu_vram_mib", "GPU VRAM used", "MiB", "max_gpu_growth_mib", "leak_margin", "memory"),
    SeriesRule("gpu_gtt_mib", "GPU GTT used", "MiB", "max_gpu_growth_mib", "leak_margin", "memory"),
    SeriesRule("gpu_total_mib", "GPU VRAM + GTT", "MiB", "max_gpu_growth_mib", "leak_margin", "memory"),
    SeriesRule("proc_vram_mib", "server VRAM (fdinfo)", "MiB", "max_gpu_growth_mib", "leak_margin", "memory"),
    SeriesRule("proc_gtt_mib", "server GTT (fdinfo)", "MiB", "max_gpu_growth_mib", "leak_margin", "memory"),
    SeriesRule("nvidia_proc_mib", "server GPU memory (nvidia-smi)", "MiB", "max_gpu_growth_mib",
               "leak_margin", "memory"),
)  # fmt: skip
LATENCY_RULES = (
    SeriesRule("ttft_p50_ms", "TTFT p50", "ms", "max_ttft_drift_ms", "drift_margin", "latency"),
    SeriesRule("ttft_p99_ms", "TTFT p99", "ms", "max_ttft_drift_ms", "drift_margin", "latency"),
    SeriesRule("tpot_p50_ms", "TPOT p50", "ms", "max_tpot_drift_ms", "drift_margin", "latency"),
    SeriesRule("tpot_p99_ms", "TPOT p99", "ms", "max_tpot_drift_ms", "drift_margin", "latency"),
)
RULES = MEMORY_RULES + LATENCY_RULES


@dataclass(frozen=True)
class Trend:
    """One role's trend on one series, with slopes per hour.

    Two tests, each at half the series' level (so that together they hold it): Mann–Kendall on
    the levels, corrected for their autocorrelation (a trend in stationary noise), and a t-test
    of the mean of the increments between windows (growth that accumulates, as a leak does: its
    levels are a random walk with drift, whose autocorrelation leaves the first test blind).
    The increments' mean is the drift itself (they sum to the growth over the soak), so memory
    that climbs and is freed (a sawtooth: many small rises, a few large releases) has a mean
    near 0 however lopsided the increments are; a rank test on them would ask whether they are
    symmetric about 0, and a sawtooth's are not. The series' p-value, which places it in the
    soak's Holm order, is twice the smaller of the two (Bonferroni over the pair).

    The slope's interval: Sen's (on the levels) and the t-interval of the increments' mean,
    each at 97.5 %, intersected (both cover the slope with at least 95 %). When they do not
    overlap the two disagree about what the series is doing, and the interval is their hull.
    """

    series: str
    role: str
    points: int
    test: TrendTest | None
    sen: SenSlope | None  # slope per hour
    increments: ShiftTest | None = None  # per hour, interval at CONFIDENCE

    @property
    def level(self) -> float:
        return self.test.level * 2 if self.test else 0.0

    @property
    def _increments_reachable(self) -> bool:
        inc = self.increments
        return inc is not None and signed_rank_min_p(inc.n) <= self.level / 2

    @property
    def decidable(self) -> bool:
        return (self.test is not None and self.test.reachable) or self._increments_reachable

    @property
    def p_value(self) -> float:
        """The series' p-value for "no drift": twice the smaller of the two tests' that can reach
        their level (1 when neither can), the order Holm's step-down takes the series in."""
        ps = [self.test.p_value] if self.test is not None and self.test.reachable else []
        if self._increments_reachable:
            assert self.increments is not None
            ps.append(self.increments.p_value)
        return min(1.0, 2 * min(ps)) if ps else 1.0

    @property
    def rising(self) -> bool:
        """Significantly upward on the levels or on the increments (each at half the level)."""
        by_levels = self.test is not None and self.test.significant and self.test.s > 0
        inc = self.increments
        by_increments = (
            inc is not None
            and self._increments_reachable
            and inc.p_value <= self.level / 2
            and inc.estimate > 0
        )
        return by_levels or by_increments

    def slope_bounds(self) -> tuple[float, float]:
        """(low, high) slope per hour, low ≤ high: Sen's interval and the increments' intersected,
        or their hull where they do not overlap."""
        if self.sen is None or math.isnan(self.sen.slope):
            return (math.nan, math.nan)
        low, high = self.sen.low, self.sen.high
        inc = self.increments
        if inc is not None and not (math.isnan(inc.low) or math.isnan(inc.high)):
            both = max(low, inc.low), min(high, inc.high)
            low, high = both if both[0] <= both[1] else (min(low, inc.low), max(high, inc.high))
        return low, high

    def growth(self, horizon_s: float) -> tuple[float, float, float]:
        """(lower, estimate, upper) growth over `horizon_s` from the slope and its interval."""
        if self.sen is None or math.isnan(self.sen.slope):
            return (math.nan, math.nan, math.nan)
        h = horizon_s / HOUR
        low, high = self.slope_bounds()
        return (low * h, self.sen.slope * h, high * h)

    def as_json(self, horizon_s: float) -> dict[str, Any]:
        low, mid, high = self.growth(horizon_s)
        t = self.test
        return {
            "series": self.series,
            "role": self.role,
            "points": self.points,
            "method": t.method if t else None,
            "s": t.s if t else None,
            "tau": t.tau if t else None,
            "p_value": t.p_value if t else None,
            "variance_factor": t.variance_factor if t else None,
            "reachable": self.decidable,  # either test can reach its level
            "slope_per_h": self.sen.slope if self.sen else None,
            "slope_low_per_h": self.slope_bounds()[0] if self.sen else None,
            "slope_high_per_h": self.slope_bounds()[1] if self.sen else None,
            "increments_p_value": self.increments.p_value if self.increments else None,
            "growth_low": low,
            "growth": mid,
            "growth_high": high,
        }


def telemetry_windows(frame: pd.DataFrame, start_s: float, width_s: float) -> pd.DataFrame:
    """Window medians of the memory columns, in MiB, from `start_s` on (index: window centre)."""
    if frame.empty or "t_s" not in frame:
        return pd.DataFrame()
    data = frame[frame["t_s"] >= start_s].copy()
    columns: dict[str, pd.Series] = {}
    for rule in MEMORY_RULES:
        source = rule.name.replace("_mib", "_bytes")
        if source in data:
            columns[rule.name] = data[source].astype(float) / MIB
    # A process nvidia-smi lists always holds memory: a 0 for the server's own is a sample that
    # found none of its processes (what the sampler wrote for contained servers before it ran
    # nvidia-smi outside the containment), so it is missing, never a flat series.
    if "nvidia_proc_mib" in columns:
        columns["nvidia_proc_mib"] = columns["nvidia_proc_mib"].where(columns["nvidia_proc_mib"] > 0)
    if not columns:
        return pd.DataFrame()
    table = pd.DataFrame(columns)
    window = ((data["t_s"] - start_s) // width_s).astype(int)
    grouped = table.groupby(window.to_numpy()).median()
    grouped.index = start_s + (grouped.index.to_numpy() + 0.5) * width_s
    return grouped


def request_windows(frame: pd.DataFrame, start_s: float, width_s: float) -> pd.DataFrame:
    """Per window of request end times: TTFT and TPOT p50/p99 (ms), tokens per second."""
    if frame.empty:
        return pd.DataFrame()
    done = frame[(frame["status"] == "ok") & (frame["end_s"] >= start_s)].copy()
    if done.empty:
        return pd.DataFrame()
    done["window"] = ((done["end_s"] - start_s) // width_s).astype(int)
    rows: dict[int, dict[str, float]] = {}
    for window, group in done.groupby("window"):
        row: dict[str, float] = {"tokens_per_s": float(group["tokens"].sum()) / width_s}
        for name in ("ttft", "tpot"):
            values = group[f"{name}_s"].dropna().to_numpy(dtype=float) * 1000.0
            if len(values):
                row[f"{name}_p50_ms"] = float(np.percentile(values, 50))
                row[f"{name}_p99_ms"] = float(np.percentile(values, 99))
        rows[int(str(window))] = row
    table = pd.DataFrame.from_dict(rows, orient="index").sort_index()
    table.index = start_s + (table.index.to_numpy() + 0.5) * width_s
    return table


def trend(series: str, role: str, windows: pd.DataFrame, alpha: float) -> Trend:
    """The trend of one column of a window table (slopes per hour)."""
    if series not in windows:
        return Trend(series, role, 0, None, None)
    column = windows[series].dropna()
    t = column.index.to_numpy(dtype=float)
    y = column.to_numpy(dtype=float)
    # Half the level each for the two tests of `Trend`.
    if len(y) < 3:
        return Trend(series, role, len(y), mann_kendall(list(y), alpha / 2) if len(y) else None, None)
    test = mann_kendall(list(y), alpha / 2)
    sen = theil_sen(t / HOUR, y, 1 - (1 - CONFIDENCE) / 2, variance_factor=test.variance_factor)
    rates = np.diff(y) / (np.diff(t) / HOUR)
    # Windows are evenly spaced, so the mean of the rates is the growth over the series per hour.
    increments = mean_shift(list(rates), (1 - CONFIDENCE) / 2)
    return Trend(series, role, len(y), test, sen, increments)


@dataclass(frozen=True)
class SeriesVerdict:
    rule: SeriesRule
    candidate: Trend
    pinned: Trend | None
    finding: str  # LEAK, GROWS_LIKE_PINNED, TOO_SHORT, NO_LEAK
    budget: float | None
    margin: float
    why: str


def judge_series(
    rule: SeriesRule, candidate: Trend, pinned: Trend | None, limits: dict[str, float], horizon_s: float
) -> SeriesVerdict:
    """The leak rule on one series (see the module docstring)."""
    budget = limits.get(rule.budget) if rule.budget else None
    margin = float(limits.get(rule.margin, 0.0))
    unit = rule.unit

    def verdict(finding: str, why: str) -> SeriesVerdict:
        return SeriesVerdict(rule, candidate, pinned, finding, budget, margin, why)

    # Pinned needs a slope with its interval (the candidate is compared with it), not a
    # significant test of its own.
    if not candidate.decidable or (pinned is not None and pinned.sen is None):
        short = [t for t in (candidate, pinned) if t is not None and not t.decidable]
        test = candidate.test
        level = test.level if test else 0.005
        # Either test may decide: the fewer windows of the two (the increments' test needs m + 1
        # windows for m increments, the levels' test more the more autocorrelated they are).
        by_increments = next(m for m in range(1, 64) if signed_rank_min_p(m) <= level) + 1
        need = min(min_points(level, test.variance_factor if test else 1.0), by_increments)
        return verdict(
            TOO_SHORT,
            ", ".join(f"{t.role} has {t.points} windows" for t in short)
            + f": the trend tests need {need} to reach their level",
        )
    test, sen = candidate.test, candidate.sen
    assert test is not None and sen is not None
    low = candidate.growth(horizon_s)[0]
    rising = candidate.rising
    over = budget is not None and low > budget
    pinned_slope = pinned.sen.slope if pinned is not None and pinned.sen is not None else math.nan
    pinned_high = pinned.slope_bounds()[1] if pinned is not None and pinned.sen is not None else math.nan
    slope_low, slope_high = candidate.slope_bounds()
    # Steeper than pinned beyond doubt: the candidate's lower bound clears pinned's upper bound
    # by the margin. Point estimates alone would call a shared growth (a prompt cache filling
    # in both builds) a leak about half the time.
    excess = slope_low - pinned_high
    steeper = math.isnan(pinned_high) or excess > margin
    hours = horizon_s / HOUR
    inc = candidate.increments
    text = (
        f"{rule.label}: p = {test.p_value:.3g} (levels)"
        + (f", {inc.p_value:.3g} (increments)" if inc is not None else "")
        + f", slope {sen.slope:+.3g} {unit}/h [{slope_low:+.3g}, {slope_high:+.3g}], "
        f"at least {low:+.3g} {unit} over {hours:.3g} h"
    )
    if rising and over and steeper:
        return verdict(
            LEAK,
            f"{text} > budget {budget:g} {unit}; pinned {pinned_slope:+.3g} {unit}/h, candidate's "
            f"lower bound above pinned's upper by {excess:+.3g} > margin {margin:g}",
        )
    if rising and over:
        return verdict(
            GROWS_LIKE_PINNED,
            f"{text} > budget {budget:g} {unit}, but pinned grows as fast "
            f"({pinned_slope:+.3g} {unit}/h, margin {margin:g})",
        )
    return verdict(NO_LEAK, text)
