"""The bench check's report: the seed's results table, paired ratios (table and dot plot), the
schedule, and what the evidence cannot show. Pure functions of the judged outcomes."""

from __future__ import annotations

import math
import statistics
from statistics import NormalDist
from typing import Any

from pydantic import BaseModel

from qualify.bench.judge import INCONCLUSIVE, INVALID, SLOWER, Outcome, Series, pair_ratios
from qualify.checks.figures import DotsChart, Mark, Table
from qualify.records.bench import BenchSchedule, BenchUnit, SharedFact
from qualify.stats import abtests


def interval(shift: abtests.ShiftTest) -> str:
    high = "∞" if math.isinf(shift.ratio_high) else f"{shift.ratio_high:.4f}"
    return f"{shift.ratio_low:.4f}, {high}"


def median_value(series: Series, index: int) -> float | None:
    logs = [v for v in (pair[index] for pair in series.pairs) if v is not None]
    return math.exp(statistics.median(logs)) if logs else None


def noise(series: Series) -> float | None:
    """The robust SD of the paired log ratios; None below 3 pairs, where it means nothing."""
    diffs = [b - a for a, b in series.pairs if a is not None and b is not None]
    return abtests.robust_sd(diffs) if len(diffs) >= 3 else None


def shown_noise(series: Series) -> str:
    # An SD, never "±": a "±" beside the interval reads as a range of R, which it is not.
    value = noise(series)
    return "—" if value is None else f"{value:.2%}"


# The pair noise and the interval are two statistics on two scales, and the table says which:
# the noise is the spread of ONE pair's log ratio (1.4826 × MAD: the SD of normal pairs, robust
# to an outlier); the interval is the exact Hodges–Lehmann confidence interval of R, the shift
# of ALL the pairs, at confidence 1 − level (the level after Holm and the looks). With normal
# pairs the interval reaches about z · SD · √(π / 3n) either side of R (the Hodges–Lehmann
# estimator's standard error is SD · √(π / 3n)): it narrows with the pairs while the noise does
# not, and it is wider than the noise implies when a few pairs lie far from the rest, which the
# robust SD leaves out and the interval, from every pair, does not.
NOISE_COLUMN = "pair noise: SD of one pair's log ratio"
INTERVAL_COLUMN = "CI on R at 1 − level"
#: How many times the interval implied by the noise the interval must be for a note to say so:
#: with normal pairs (n ≥ 12) the ratio stays under 3 in 99 % of simulated checks.
WIDER_THAN_NOISE = 3.0
WIDER_MIN_PAIRS = 12


def implied_half_width(sd: float, pairs: int, level: float) -> float:
    """The half-width, on the log scale, of the interval on R that normal pairs of this SD give."""
    return NormalDist().inv_cdf(1 - level / 2) * sd * math.sqrt(math.pi / (3 * pairs))


def wider_than_noise(outcome: Outcome, series: Series) -> float | None:
    """How many times wider the test's interval is than its noise implies, when that is more
    than `WIDER_THAN_NOISE` (None otherwise, and for an unpaired or open-ended interval)."""
    shift, sd = outcome.shift, noise(series)
    if shift is None or not outcome.paired or sd is None or sd <= 0 or shift.n < WIDER_MIN_PAIRS:
        return None
    if not (math.isfinite(shift.low) and math.isfinite(shift.high)):
        return None
    times = (shift.high - shift.low) / 2 / implied_half_width(sd, shift.n, shift.level)
    return times if times > WIDER_THAN_NOISE else None


def _delta(ratio: float, higher_is_better: bool) -> str:
    """R − 1 as the table and the chart show it: "-1.09% slower"."""
    return f"{ratio - 1:+.2%}{_direction(ratio, higher_is_better)}"


def _direction(ratio: float, higher_is_better: bool) -> str:
    """ " faster" or " slower" for a ratio candidate/pinned: the sign of R − 1 alone means the
    opposite for a time (lower is better) than for a throughput."""
    if ratio == 1:
        return ""
    return " faster" if (ratio > 1) == higher_is_better else " slower"


def results_table(
    outcomes: list[Outcome],
    by_label: dict[str, Series],
    invalid: dict[str, str],
    ratios: list[float],
    margin: float,
) -> Table:
    rows: list[tuple[Any, ...]] = []
    for outcome in outcomes:
        series, shift = by_label[outcome.label], outcome.shift
        pinned, candidate = median_value(series, 0), median_value(series, 1)
        finding = INVALID if outcome.label in invalid else outcome.finding
        if finding == SLOWER and outcome.regression:
            finding = "SLOWER (regression)"
        rows.append(
            (
                outcome.label,
                f"{pinned:.2f}" if pinned else "—",
                f"{candidate:.2f}" if candidate else "—",
                _delta(shift.ratio, series.higher_is_better) if shift else "—",
                interval(shift) if shift else "—",
                f"{shift.p_value:.3g}" if shift else "—",
                f"{shift.level:.3g}" if shift else "—",
                finding,
                f"{outcome.pairs} (look {outcome.look})" + ("" if outcome.paired else ", unpaired U"),
                shown_noise(series),
            )
        )
    if ratios:
        geo = abtests.geometric_mean(ratios)
        rows.append(
            ("geometric mean (context, not gated)", "", "", f"{geo - 1:+.2%}", "", "", "", "", "", "")
        )
    unit = next(iter(by_label.values())).unit if by_label else ""
    return Table(
        title=f"Throughput, candidate vs pinned (δ = {margin:.1%}). R: the Hodges–Lehmann ratio "
        "candidate/pinned over the pairs (faster or slower said beside it: a paired estimate may point "
        "the other way from the two roles' medians, which drift between pairs moves), its confidence "
        "interval at 1 − level; pair noise: the "
        "spread of one pair, not of R (with normal pairs the interval reaches about "
        "z·SD·√(π/3n) either side of R, n the pairs)",
        columns=(
            "test",
            f"pinned {unit}",
            f"candidate {unit}",
            "Δ = R − 1",
            INTERVAL_COLUMN,
            "p",
            "level",
            "finding",
            "pairs",
            NOISE_COLUMN,
        ),
        rows=tuple(rows),
    )


def ratios_table(outcomes: list[Outcome], by_label: dict[str, Series]) -> Table:
    rows = tuple(
        (o.label, " ".join(f"{r - 1:+.1%}" for r in pair_ratios(by_label[o.label]))) for o in outcomes
    )
    return Table(
        title="Paired ratios, candidate/pinned − 1, in pair order",
        columns=("test", "pairs"),
        rows=rows,
        collapsed=True,
    )


def ratios_chart(outcomes: list[Outcome], by_label: dict[str, Series], margin: float) -> DotsChart:
    data = {o.label: {"candidate": [100 * (r - 1) for r in pair_ratios(by_label[o.label])]} for o in outcomes}
    described = "; ".join(
        f"{label}: {len(v['candidate'])} pairs from {min(v['candidate'], default=0):+.1f} % "
        f"to {max(v['candidate'], default=0):+.1f} %"
        for label, v in data.items()
    )
    # The line over each test is the table's Δ (the test's estimate of R − 1), not a median of
    # the dots, so chart and table say the same; ±δ are the margins the test decides against.
    estimates = tuple(
        Mark(
            y=100 * (o.shift.ratio - 1),
            category=o.label,
            label=f"Δ {_delta(o.shift.ratio, by_label[o.label].higher_is_better)}",
        )
        for o in outcomes
        if o.shift is not None
    )
    bounds = (
        Mark(y=100 * margin, label=f"+δ {margin:.1%}"),
        Mark(y=-100 * margin, label=f"−δ {margin:.1%}"),
    )
    return DotsChart(
        title=f"Paired ratios: candidate/pinned − 1 per pair, % (δ = ±{margin:.0%})",
        alt=f"Candidate against pinned throughput, one dot per pair: {described}.",
        data={label: {role: tuple(v) for role, v in per_role.items()} for label, per_role in data.items()},
        y_label="candidate vs pinned, %",
        marks=(*bounds, *estimates),
    )


def limits_of_evidence(
    schedule: BenchSchedule, outcomes: list[Outcome], by_label: dict[str, Series], margin: float, aa: bool
) -> list[str]:
    notes = [
        f"{schedule.pairs} pairs ran ({schedule.stop_reason or 'stopped'}); "
        "results hold for these commands, this model and this machine only.",
        f"a regression is called only when a test's whole interval lies below 1 − {margin:.1%}; "
        "a slowdown whose interval reaches across that line is INCONCLUSIVE, not a regression.",
    ]
    rule = schedule.plan  # the stopping rule
    needed = rule.computed_min_pairs if rule is not None else None
    if rule is not None and needed is not None and schedule.pairs < needed:
        notes.append(
            f"fewer pairs ran than the {needed} needed to reach "
            f"p ≤ {rule.first_level:.3g}: a difference could not be shown at that level."
        )
    open_tests = [o.label for o in outcomes if o.finding == INCONCLUSIVE]
    if open_tests:
        notes.append(
            f"undecided at ±{margin:.1%}: {', '.join(open_tests)} (the interval on R reaches past the "
            "margin with these pairs, or they cannot reach the test's level: see each test's finding)."
        )
    loads = [u.env_before.load for u in schedule.units if u.env_before and u.env_before.load is not None]
    if loads:
        notes.append(
            f"1-minute load during the units: median {statistics.median(loads):.2f}, max {max(loads):.2f} "
            "(other processes share the CPU unless the load stays near 0)."
        )
    for outcome in outcomes:
        times = wider_than_noise(outcome, by_label[outcome.label])
        if times is not None:
            notes.append(
                f"{outcome.label}: the interval on R is {times:.1f} times as wide as its pair noise "
                f"({shown_noise(by_label[outcome.label])}) implies for {outcome.pairs} normal pairs: a "
                "few pairs lie far from the rest (see the paired ratios); the noise, a robust SD, "
                "describes the typical pair, the interval every pair."
            )
    if aa and by_label:
        floor = ", ".join(f"{label} SD {shown_noise(s)} per pair" for label, s in by_label.items())
        notes.append(f"A/A run: the pair noise is the noise floor, next to δ = {margin:.1%}: {floor}.")
    return notes


def _as_saved(part: BaseModel | None, key: str, absent: Any) -> Any:
    """A field as its document held it; `absent` where the document left it out."""
    return getattr(part, key) if part is not None and key in part.model_fields_set else absent


def schedule_table(units: list[BenchUnit], shared: SharedFact | None = None) -> Table:
    """Every unit in run order; a run set's member's title says where its time went (the
    schedule measured once with the other members)."""
    title = "Schedule (warm-up thrown away; pairs in ABBA order)"
    if shared is not None:
        took = "" if shared.duration_s is None else f" in {shared.duration_s:.1f} s"
        beside = ", ".join(shared.with_) or "no other member"
        title = (
            f"Schedule: this member's units of the set's one schedule ({shared.folder}), "
            f"measured with {beside}{took}; warm-up thrown away"
        )
    rows = []
    for unit in units:
        error = unit.error.message if unit.error else ""
        rows.append(
            (
                unit.index,
                unit.phase,
                unit.pair or "",
                unit.role,
                _as_saved(unit, "started_at", ""),
                _as_saved(unit, "duration_s", ""),
                f"{_as_saved(unit.env_before, 'load', '?')} → {_as_saved(unit.env_after, 'load', '?')}",
                _as_saved(unit, "outcome", error),
                "; ".join(unit.env_notes),
            )
        )
    return Table(
        title=title,
        columns=("#", "phase", "pair", "role", "started", "s", "load", "outcome", "environment"),
        rows=tuple(rows),
        collapsed=True,
    )
