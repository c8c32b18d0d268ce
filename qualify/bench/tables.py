"""The bench check's report: the seed's results table, paired ratios (table and dot plot), the
schedule, and what the evidence cannot show. Pure functions of the judged outcomes."""

from __future__ import annotations

import math
import statistics
from typing import Any

from qualify.bench.judge import INCONCLUSIVE, INVALID, SLOWER, Outcome, Series, pair_ratios
from qualify.checks.base import ChartData, TableData
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
    value = noise(series)
    return "—" if value is None else f"±{value:.2%}"


def results_table(
    outcomes: list[Outcome],
    by_label: dict[str, Series],
    invalid: dict[str, str],
    ratios: list[float],
    margin: float,
) -> TableData:
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
                f"{shift.ratio - 1:+.2%}" if shift else "—",
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
    return TableData(
        f"Throughput, candidate vs pinned (δ = {margin:.1%})",
        (
            "test",
            f"pinned {unit}",
            f"candidate {unit}",
            "Δ",
            "interval on R",
            "p",
            "level",
            "finding",
            "pairs",
            "pair noise",
        ),
        tuple(rows),
    )


def ratios_table(outcomes: list[Outcome], by_label: dict[str, Series]) -> TableData:
    rows = tuple(
        (o.label, " ".join(f"{r - 1:+.1%}" for r in pair_ratios(by_label[o.label]))) for o in outcomes
    )
    return TableData(
        "Paired ratios, candidate/pinned − 1, in pair order", ("test", "pairs"), rows, collapsed=True
    )


def ratios_chart(outcomes: list[Outcome], by_label: dict[str, Series], margin: float) -> ChartData:
    data = {o.label: {"candidate": [100 * (r - 1) for r in pair_ratios(by_label[o.label])]} for o in outcomes}
    described = "; ".join(
        f"{label}: {len(v['candidate'])} pairs from {min(v['candidate'], default=0):+.1f} % "
        f"to {max(v['candidate'], default=0):+.1f} %"
        for label, v in data.items()
    )
    # The line over each test is the table's Δ (the test's estimate of R − 1), not a median of
    # the dots, so chart and table say the same; ±δ are the margins the test decides against.
    estimates = tuple(
        {"y": 100 * (o.shift.ratio - 1), "category": o.label, "label": f"Δ {o.shift.ratio - 1:+.2%}"}
        for o in outcomes
        if o.shift is not None
    )
    bounds = (
        {"y": 100 * margin, "label": f"+δ {margin:.1%}"},
        {"y": -100 * margin, "label": f"−δ {margin:.1%}"},
    )
    return ChartData(
        f"Paired ratios: candidate/pinned − 1 per pair, % (δ = ±{margin:.0%})",
        "dots",
        f"Candidate against pinned throughput, one dot per pair: {described}.",
        data,
        y_label="candidate vs pinned, %",
        marks=(*bounds, *estimates),
    )


def limits_of_evidence(
    schedule: dict[str, Any], outcomes: list[Outcome], by_label: dict[str, Series], margin: float, aa: bool
) -> list[str]:
    notes = [
        f"{schedule.get('pairs', 0)} pairs ran ({schedule.get('stop_reason') or 'stopped'}); "
        "results hold for these commands, this model and this machine only.",
        f"a regression is called only when a test's whole interval lies below 1 − {margin:.1%}; "
        "a slowdown whose interval reaches across that line is INCONCLUSIVE, not a regression.",
    ]
    rule = schedule.get("plan") or {}  # the stopping rule
    if rule and schedule.get("pairs", 0) < rule.get("computed_min_pairs", 0):
        notes.append(
            f"fewer pairs ran than the {rule['computed_min_pairs']} needed to reach "
            f"p ≤ {rule['first_level']:.3g}: a difference could not be shown at that level."
        )
    open_tests = [o.label for o in outcomes if o.finding == INCONCLUSIVE]
    if open_tests:
        notes.append(f"undecided at ±{margin:.1%}: {', '.join(open_tests)} (the noise is larger than δ).")
    loads = [u["env_before"]["load"] for u in schedule.get("units", []) if "load" in u.get("env_before", {})]
    if loads:
        notes.append(
            f"1-minute load during the units: median {statistics.median(loads):.2f}, max {max(loads):.2f} "
            "(other processes share the CPU unless the load stays near 0)."
        )
    if aa and by_label:
        floor = ", ".join(f"{label} {shown_noise(s)}" for label, s in by_label.items())
        notes.append(f"A/A run: the pair noise is the noise floor, next to δ = {margin:.1%}: {floor}.")
    return notes


def schedule_table(units: list[dict[str, Any]]) -> TableData:
    rows = []
    for unit in units:
        before, after = unit.get("env_before", {}), unit.get("env_after", {})
        rows.append(
            (
                unit["index"],
                unit.get("phase"),
                unit.get("pair") or "",
                unit["role"],
                unit.get("started_at", ""),
                unit.get("duration_s", ""),
                f"{before.get('load', '?')} → {after.get('load', '?')}",
                unit.get("outcome", unit.get("error", {}).get("message", "")),
                "; ".join(unit.get("env_notes", [])),
            )
        )
    return TableData(
        "Schedule (warm-up thrown away; pairs in ABBA order)",
        ("#", "phase", "pair", "role", "started", "s", "load", "outcome", "environment"),
        tuple(rows),
        collapsed=True,
    )
