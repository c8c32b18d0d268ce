"""Per-test findings of a bench check, replayed look by look from the saved units.

Used twice with the same code: by `measure` at each planned look to decide whether more pairs
are needed, and by `judge` on the saved data, so a re-judged run decides exactly as the run did
(and differently only when the limits change).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qualify.bench.params import NO_CHANGE_GATE, NOT_SLOWER
from qualify.stats import abtests

if TYPE_CHECKING:
    from qualify.records.bench import BenchUnit

FASTER = "FASTER"
SLOWER = "SLOWER"
NO_CHANGE = "NO CHANGE"
INCONCLUSIVE = "INCONCLUSIVE"
INVALID = "INVALID"


@dataclass(frozen=True)
class Series:
    """One test's unit values (log of the unit median) by pair: (pinned, candidate), None when
    that unit did not report the test."""

    label: str
    unit: str
    higher_is_better: bool
    pairs: tuple[tuple[float | None, float | None], ...]


@dataclass(frozen=True)
class Outcome:
    label: str
    finding: str
    regression: bool
    shift: abtests.ShiftTest | None
    look: int  # the look (1-based) at which the finding was reached, or the last one
    pairs: int  # pairs looked at
    paired: bool
    note: str = ""


NOT_SLOWER_FINDING = "NOT SLOWER"


def classify(shift: abtests.ShiftTest | None, margin: float, gate: str = NOT_SLOWER) -> tuple[str, bool, str]:
    """(finding, regression, note) from the interval on the candidate/pinned ratio R.

    Decided from the interval, never the point estimate, so that a candidate truly slower by
    less than δ is not called a regression more often than the test's level allows, and one
    truly slower by δ is not passed more often than that either. Each end of the interval is a
    one-sided bound at half the test's level.
    SLOWER and a regression: the whole interval below 1 − δ (a slowdown shown beyond the margin).
    With the "not-slower" gate every interval whose lower end is at least 1 − δ is decided and
    no regression, whatever its upper end: FASTER above 1, SLOWER (within the margin) below 1,
    NO CHANGE inside [1 − δ, 1 + δ], NOT SLOWER otherwise (it holds 1 and reaches past 1 + δ).
    INCONCLUSIVE: the interval holds 1 − δ (a slowdown within the margin cannot be told from one
    beyond it).
    With the "no-change" gate the interval must also show which way it moved: FASTER above 1,
    SLOWER within the margin below 1, NO CHANGE inside [1 − δ, 1 + δ]; an interval that holds 1
    and reaches past 1 + δ is INCONCLUSIVE too.
    Always INCONCLUSIVE when the samples cannot reach the level of the test.
    """
    if shift is None:
        return INCONCLUSIVE, False, "no complete data on both sides"
    if not shift.reachable:
        return (
            INCONCLUSIVE,
            False,
            f"{shift.n} pairs cannot reach p ≤ {shift.level:.3g} (best possible {shift.min_p:.3g})",
        )
    if shift.ratio_high < 1 - margin:
        return SLOWER, True, ""
    if shift.ratio_low < 1 - margin:
        if shift.ratio_high < 1:
            return INCONCLUSIVE, False, f"slower, but the interval reaches across 1 − {margin:.1%}"
        return INCONCLUSIVE, False, f"the interval reaches below 1 − {margin:.1%}"
    if shift.ratio_high < 1:
        return SLOWER, False, ""
    if shift.ratio_low > 1:
        return FASTER, False, ""
    if shift.ratio_high <= 1 + margin:
        return NO_CHANGE, False, ""
    if gate == NO_CHANGE_GATE:
        return INCONCLUSIVE, False, f"the interval holds 1 and reaches past 1 + {margin:.1%}"
    return NOT_SLOWER_FINDING, False, ""


def _shift(test: Series, n: int, level: float) -> tuple[abtests.ShiftTest | None, bool]:
    """The test on the first `n` pairs: paired when all are complete, else Mann–Whitney U."""
    sign = 1.0 if test.higher_is_better else -1.0
    pairs = test.pairs[:n]
    if pairs and all(a is not None and b is not None for a, b in pairs):
        diffs = [sign * (b - a) for a, b in pairs if a is not None and b is not None]
        return abtests.wilcoxon_signed_rank(diffs, level), True
    before = [sign * a for a, _ in pairs if a is not None]
    after = [sign * b for _, b in pairs if b is not None]
    if not before or not after:
        return None, False
    return abtests.mann_whitney(before, after, level), False


def evaluate(
    tests: Sequence[Series], planned: Sequence[int], alpha: float, margin: float, gate: str = NOT_SLOWER
) -> list[Outcome]:
    """Findings at each look, Holm across tests within a look, α split evenly over the planned
    looks. A test keeps the first decisive finding it reaches (anything but INCONCLUSIVE, by
    `classify` under `gate`); a test never decided is INCONCLUSIVE at the last look."""
    completed = max((len(t.pairs) for t in tests), default=0)
    points = abtests.look_points(planned, completed)
    alphas = abtests.look_alphas(alpha, max(len(planned), 1))
    final: dict[str, Outcome] = {}
    decided: set[str] = set()
    for look, n in enumerate(points):
        preliminary = [_shift(t, n, alphas[look])[0] for t in tests]
        steps = abtests.holm([s.p_value if s else 1.0 for s in preliminary], alphas[look])
        for test, step in zip(tests, steps, strict=True):
            if test.label in decided:
                continue
            shift, paired = _shift(test, n, step.level)
            finding, regression, note = classify(shift, margin, gate)
            pairs = min(n, len(test.pairs))
            final[test.label] = Outcome(test.label, finding, regression, shift, look + 1, pairs, paired, note)
            if finding != INCONCLUSIVE:
                decided.add(test.label)
    return [final[t.label] for t in tests if t.label in final]


def unit_center(fmt: str, together: bool = False) -> Callable[[Sequence[float]], float]:
    """How a unit's repetitions become its value (a log): their median for a process's
    repetitions, which agree but for a few outliers; the mean of their logs for a block of
    servers' rounds (`format = "llama-server"`) or of units run together (`together`), which
    sample the host's states side by side: where the host runs at two speeds, the median of
    such repetitions jumps from one speed to the other as the share of each passes one half,
    the mean follows the share (README.md, "The bench around the engine";
    examples/llama-cpp-cuda/host_states.py and examples/c-kernels/two_speed_host.py simulate
    both)."""
    return abtests.log_mean if fmt == "llama-server" or together else abtests.log_median


def series_from(
    schedule: Sequence[BenchUnit],
    values: Mapping[int, Mapping[str, Sequence[float]]],
    kinds: Mapping[str, tuple[str, bool]],
    center: Callable[[Sequence[float]], float] = abtests.log_median,
) -> list[Series]:
    """Per-test pairs from the schedule (units in run order) and each unit's values by test.

    Only completed pairs count: a pair's two units both ran (`ok`). `kinds` gives each test's
    unit and direction; `center` makes a unit's repetitions its value (`unit_center`).
    """
    pairs: dict[int, dict[str, int]] = {}
    for unit in schedule:
        if unit.phase == "pair" and unit.ok and unit.pair is not None:
            pairs.setdefault(unit.pair, {})[unit.role] = unit.index
    complete = [p for p in sorted(pairs) if {"pinned", "candidate"} <= set(pairs[p])]
    out: list[Series] = []
    for label, (unit_name, higher) in kinds.items():
        rows: list[tuple[float | None, float | None]] = []
        for p in complete:
            got: list[float | None] = []
            for role in ("pinned", "candidate"):
                samples = [v for v in values.get(pairs[p][role], {}).get(label, ()) if v > 0]
                got.append(center(samples) if samples else None)
            rows.append((got[0], got[1]))
        out.append(Series(label, unit_name, higher, tuple(rows)))
    return out


def pair_ratios(test: Series) -> list[float]:
    """The candidate/pinned ratio of every complete pair (direction-adjusted), for the report."""
    sign = 1.0 if test.higher_is_better else -1.0
    return [math.exp(sign * (b - a)) for a, b in test.pairs if a is not None and b is not None]
