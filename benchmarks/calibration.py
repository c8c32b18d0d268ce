"""How often the gates are wrong: seeded simulations through qualify's own judges.

    python benchmarks/calibration.py [--runs 400] [--only SECTION] [--summary]

Prints, next to each nominal rate, the rate measured on simulated data where the truth is
known, with its Monte Carlo standard error (√(p(1 − p)/runs) at the nominal p); a cell is ok
when it is within nominal by two standard errors. `--summary` ends with the worst cell of each
gate (the README's table). Sections:
- bench (`qualify.bench.judge.evaluate`, the planned looks and Holm levels the schedule uses):
  A/A false alarms (FASTER or SLOWER) per test and family-wise for 1, 2 and 4 tests, at 1/3/5 %
  unit CV with independent lognormal noise and at 3 % with Student-t (3 df) and AR(1) noise
  (φ 0.5 and 0.8, unit to unit in run order); a slowdown of δ/2 and of δ called a regression;
  power to call a slowdown of 2δ a regression (δ = 3 %, α = 0.05, 16 pairs at most, two looks);
- bench across candidates (a run set: `qualify.core.designs`' Williams order, each candidate's
  units read through `candidate_view` and `series_from` as its judge reads them, `evaluate` at
  α/k): 1, 2 and 3 candidates all equal to pinned, under a slow drift, a 1 % penalty on every
  unit's position after the first in its block, and independent or AR(1) (φ 0.5) unit noise of
  3 %; then a carry-over that depends on the unit before (a unit after one candidate's is 2 %
  slower), with the design's chained rows and with the rows in their plain order;
- A/A NO CHANGE: how many pairs an A/A bench needs to be NO CHANGE at a given unit CV (the
  whole interval inside ±δ), for δ 3 % and 5 % and 1, 4 and 6 tests;
- numerics (`qualify.numerics.bounds.mean_bound`, the bound `judged_bounds` and the
  non-inferiority gate judge a mean on: the wider of BCa and Cantelli's; the verdict by
  `qualify.numerics.noninferiority.decide`, the margin inside the test, beside the former rule
  that compared a bound on θ with δ estimated from the same data): coverage of the 95 % upper
  bound on a per-token mean whose chunk means are lognormal (σ 0.3 to 1.5) at 48 chunks (the
  stage's `min_chunks`) and 100, on five times the data sets of the other cells, and at 32 (σ
  1.0 and 1.5: why the minimum is 48); one look at 48 and 100 chunks: non-inferiority passed
  when the truth sits exactly on the margin, and when 10 % beyond it, with chunks heavy-tailed
  to the right, to the left, on both sides (two independent heavy-tailed builds),
  multiplicatively (the candidate's chunk = the pinned one's × noise) and additively (pinned's
  error repeated plus damage of its own; lognormal and Pareto chunks), with autocorrelated
  chunks (AR(1) φ 0.8) and with a sawtooth of difficulty; FAIL when the candidate equals pinned;
  what the guard costs (the bound's distance from the estimate against BCa's, and how often a
  candidate equal to pinned passes); the bound on rare confident flips (about 1.2 expected);
- numerics looks (`qualify.numerics.looks.sequential` with the judge's `Settings.at_look`):
  non-inferiority judged at 48, 96 and 192 chunks, stopping at the first look that decides,
  every model above: PASS with the truth on the margin, FAIL of a candidate equal to pinned,
  how often equal builds PASS and a candidate 30 % worse than pinned FAILs, and the chunks
  scored per decision;
- numerics bounds: the bound non-inferiority could judge on (Student's t, BCa alone, BCa at
  least Cantelli's), each at 48 chunks over every model: the worst PASS with the truth on the
  margin, and how often equal builds PASS;
- soak (`qualify.soak.trend.trend` and `judge_series`, the leak rule against a flat pinned with a
  budget of 8 noise SDs over the soak): trendless AR(1) windows (φ 0/0.5/0.8, 12 to 96 windows)
  called rising at α = 1 % and the coverage of the 95 % slope interval; a sawtooth (climbs 8 SD
  over 10 windows, then freed), a sine (amplitude 4 SD, 24 windows a period) and a single step
  (8 SD and 32 SD) called a LEAK, and how often a judged interval is inverted (low > high);
  the power to find a linear leak of 1, 1.5, 2 and 4 times the budget, and a random walk
  whose drift adds 2 budgets;
- soak bound (`bound_budgets`: the growth over the horizon must be bounded within the budget for
  a PASS, `qualify.soak.check._unbounded`): a linear leak of exactly the budget over the horizon
  passed, in normal, Student-t (3 df), AR(1) (φ 0.5, 0.8) and sawtooth noise, at 21 windows
  judged over 6.2 soaks (the CUDA example's decide soak), 48 and 96 over one soak and 96 over
  four; beside it how often flat memory is bounded (a PASS the soak earned).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qualify.bench.design import candidate_view
from qualify.bench.judge import (
    FASTER,
    INCONCLUSIVE,
    NO_CHANGE,
    SLOWER,
    Outcome,
    Series,
    evaluate,
    series_from,
)
from qualify.bench.params import NO_CHANGE_GATE, NOT_SLOWER
from qualify.core.designs import block_order, williams_rows
from qualify.numerics.bootstrap import BootstrapBound, RatioOfSums, Side, bca_bound
from qualify.numerics.bounds import cantelli_guarded, mean_bound, with_exact
from qualify.numerics.judge import DEFAULT_NI_MARGIN, Settings, noninferiority_delta
from qualify.numerics.kind import KIND
from qualify.numerics.looks import GuardPlan, guard_plan, planned_looks, sequential
from qualify.numerics.noninferiority import MeanBound, decide, margin_tests
from qualify.soak.check import _unbounded
from qualify.soak.trend import LEAK, MEMORY_RULES, judge_series, trend
from qualify.stats import abtests

ALPHA, MARGIN = 0.05, 0.03


def se(p: float, runs: int) -> float:
    return math.sqrt(p * (1 - p) / runs)


@dataclass(frozen=True)
class Cell:
    """One simulated rate against its nominal one (`coverage`: at least nominal; else at most)."""

    gate: str
    label: str
    measured: float
    nominal: float | None
    runs: int
    coverage: bool = False
    count: bool = False  # `measured` is a count (pairs), not a rate

    @property
    def ok(self) -> bool:
        if self.nominal is None:
            return True
        margin = 2 * se(self.nominal, self.runs)
        return (
            self.measured >= self.nominal - margin
            if self.coverage
            else self.measured <= self.nominal + margin
        )

    def line(self) -> str:
        if self.nominal is None:
            value = f"{self.measured:6.0f}" if self.count else f"{self.measured:6.3f}"
            return f"  {self.label:<62} {value}   (no target)"
        margin = 2 * se(self.nominal, self.runs)
        target = (
            f"≥ {self.nominal:.3f} (−{margin:.3f})"
            if self.coverage
            else f"≤ {self.nominal:.3f} (+{margin:.3f})"
        )
        return (
            f"  {self.label:<62} {self.measured:6.3f}   target {target:<20} {'ok' if self.ok else 'MISSED'}"
        )


def info(gate: str, label: str, value: float, *, count: bool = False) -> Cell:
    return Cell(gate, label, value, None, 0, count=count)


# --- bench ----------------------------------------------------------------------------------


def unit_noise(rng: np.random.Generator, n: int, cv: float, noise: str) -> np.ndarray:
    """`n` units' log-scale noise of SD `cv`, in run order: normal, t3 (scaled to SD cv) or AR(1)."""
    if noise == "normal":
        return rng.normal(0, cv, n)
    if noise == "t3":
        return rng.standard_t(3, n) * cv / math.sqrt(3.0)
    phi = float(noise.removeprefix("ar"))
    e = rng.normal(0, cv * math.sqrt(1 - phi * phi), n + 50)
    y = np.zeros(n + 50)
    y[0] = rng.normal(0, cv)
    for i in range(1, n + 50):
        y[i] = phi * y[i - 1] + e[i]
    return y[50:]


def bench_series(
    rng: np.random.Generator, pairs: int, effect: float, cv: float, label: str, noise: str = "normal"
) -> Series:
    """Unit log-medians in ABBA order; candidate = pinned × (1 + effect)."""
    e = unit_noise(rng, 2 * pairs, cv, noise)
    values = []
    for i in range(pairs):
        first, second = e[2 * i], e[2 * i + 1]
        pinned, candidate = (first, second) if i % 2 == 0 else (second, first)
        values.append((math.log(100.0) + pinned, math.log(100.0) + math.log(1 + effect) + candidate))
    return Series(label, "t/s", True, tuple(values))


def looks_for(alpha: float, tests: int, maximum: int = 16) -> tuple[int, ...]:
    return abtests.planned_looks(abtests.min_pairs(abtests.first_holm_level(alpha, tests, 2)), maximum, 2)


def bench(runs: int) -> list[Cell]:
    gate = "bench A/A"
    cells: list[Cell] = []
    rng = np.random.default_rng(20261201)
    for tests in (1, 2, 4):
        looks = looks_for(ALPHA, tests)
        for cv, noise in NOISES:
            per_test = family = 0
            for _ in range(runs):
                series = [bench_series(rng, looks[-1], 0.0, cv, f"t{i}", noise) for i in range(tests)]
                found = [o.finding in (FASTER, SLOWER) for o in evaluate(series, looks, ALPHA, MARGIN)]
                per_test += sum(found)
                family += any(found)
            what = f"A/A {tests} test(s), CV {cv:.0%} {noise}"
            cells.append(Cell(gate, f"{what}: per test", per_test / (runs * tests), ALPHA, runs * tests))
            cells.append(Cell(gate, f"{what}: family-wise", family / runs, ALPHA, runs))
    looks = looks_for(ALPHA, 1)
    for cv in (0.01, 0.03):
        for effect, name in ((-MARGIN / 2, "regression called at δ/2"), (-MARGIN, "regression called at δ"),
                             (-2 * MARGIN, "power at 2δ slower")):  # fmt: skip
            hits = 0
            for _ in range(runs):
                [o] = evaluate([bench_series(rng, looks[-1], effect, cv, "t")], looks, ALPHA, MARGIN)
                hits += o.finding == SLOWER and o.regression
            label = f"{name}, CV {cv:.0%}"
            if name.startswith("power"):
                cells.append(info("bench power", label, hits / runs))
            else:
                cells.append(Cell("bench regression", label, hits / runs, ALPHA, runs))
    return cells


def simulated_set(
    rng: np.random.Generator,
    roles: list[str],
    blocks: int,
    tests: int,
    cv: float,
    *,
    rows: list[list[int]] | None = None,
    noise: str = "normal",
    carry: tuple[str, float] | None = None,
) -> tuple[list[dict[str, object]], dict[int, dict[str, tuple[float, ...]]]]:
    """Units of a run set's bench in Williams order (or `rows` cycled, or the roles' own order when
    `rows` is empty): every arm at the same speed, unit noise of `cv`, a random-walk drift, each
    position after the first in a block 1 % slower, and `carry` = (role, penalty): a unit run
    right after that role's is slower by the penalty (heat it leaves behind)."""
    units: list[dict[str, object]] = []
    values: dict[int, dict[str, tuple[float, ...]]] = {}
    e = unit_noise(rng, blocks * len(roles), cv, noise)
    level, before = 0.0, ""
    for block in range(1, blocks + 1):
        if rows is None:
            order = block_order(roles, block)
        elif rows:
            order = [roles[i] for i in rows[(block - 1) % len(rows)]]
        else:
            order = list(roles)
        for position, role in enumerate(order):
            level += rng.normal(0, 0.002)
            index = len(units)
            units.append({"index": index, "role": role, "phase": "pair", "pair": block, "ok": True})
            factor = (0.99 if position else 1.0) * (1 - carry[1] if carry and before == carry[0] else 1.0)
            centre = 100.0 * math.exp(level + e[index]) * factor
            values[index] = {f"t{i}": tuple(centre * (1 + rng.normal(0, 0.002, 3))) for i in range(tests)}
            before = role
    return units, values


def set_alarms(
    rng: np.random.Generator, runs: int, members: int, tests: int, cv: float = 0.03, **kwargs: object
) -> tuple[float, float]:
    """(any FASTER/SLOWER, any regression) over a set of `members` A/A candidates."""
    alpha = ALPHA / members
    looks = looks_for(alpha, tests)
    roles = ["pinned", *(f"c{k}" for k in range(members))]
    kinds = {f"t{i}": ("t/s", True) for i in range(tests)}
    alarms = regressions = 0
    for _ in range(runs):
        units, values = simulated_set(rng, roles, looks[-1], tests, cv, **kwargs)  # type: ignore[arg-type]
        found = [
            o
            for role in roles[1:]
            for o in evaluate(series_from(candidate_view(units, role), values, kinds), looks, alpha, MARGIN)
        ]
        alarms += any(o.finding in (FASTER, SLOWER) for o in found)
        regressions += any(o.regression for o in found)
    return alarms / runs, regressions / runs


def bench_sets(runs: int) -> list[Cell]:
    gate = "bench sets"
    cells: list[Cell] = []
    rng = np.random.default_rng(20261204)
    for noise in ("normal", "ar0.5"):
        for members in (1, 2, 3):
            for tests in (1, 2):
                alarms, regressions = set_alarms(rng, runs, members, tests, noise=noise)
                what = f"{members} candidate(s), {tests} test(s), CV 3 % {noise}"
                cells.append(Cell(gate, f"{what}: any FASTER/SLOWER", alarms, ALPHA, runs))
                cells.append(Cell(gate, f"{what}: any regression", regressions, ALPHA, runs))
    # Carry-over that depends on the unit before: after c0's unit the next runs 2 % slower, at a
    # unit CV of 1 % so that a bias would show.
    for members in (2, 3):
        plain = williams_rows(members + 1, chained=False)
        for name, rows in (("chained rows", None), ("rows in plain order", plain)):
            alarms, _ = set_alarms(rng, runs, members, 1, 0.01, rows=rows, carry=("c0", 0.02))
            label = f"{members} candidates, CV 1 %, 2 % carry-over after c0, {name}: any"
            if rows is None:
                cells.append(Cell("bench carry-over", label, alarms, ALPHA, runs))
            else:  # the contrast: why the rows are chained
                cells.append(info("bench carry-over", label, alarms))
    # The contrast: the same sets in a fixed order (pinned always first) are not balanced, and
    # the 1 % position penalty alone reads as a slowdown of every candidate.
    alarms, _ = set_alarms(rng, runs, 2, 1, 0.01, rows=[])
    cells.append(
        info("bench sets", "2 candidates, fixed order (no design), CV 1 %: any (why the design)", alarms)
    )
    return cells


def passed(outcomes: Iterable[Outcome]) -> bool:
    """The bench check passed (PASS, or WARN for a slowdown within the margin): every test decided
    and none a regression."""
    return all(o.finding != INCONCLUSIVE and not o.regression for o in outcomes)


NOISES = [(cv, "normal") for cv in (0.01, 0.03, 0.05)] + [(0.03, n) for n in ("t3", "ar0.5", "ar0.8")]


def not_slower(runs: int) -> list[Cell]:
    """The default gate, "not slower by more than δ": a candidate truly slower by exactly δ passed
    (every test at the margin; the error the gate bounds, nominal α), and the power: A/A passed,
    at 16 pairs at most in two looks, under every noise model of the A/A cells, for 1, 2 and 4
    tests. Under the former two-sided rule ("no-change") beside it, for the contrast."""
    cells: list[Cell] = []
    rng = np.random.default_rng(20261206)
    for tests in (1, 2, 4):
        looks = looks_for(ALPHA, tests)
        for cv, noise in NOISES:
            at_margin = equal = equal_two_sided = 0
            for _ in range(runs):
                margin_series = [
                    bench_series(rng, looks[-1], -MARGIN, cv, f"t{i}", noise) for i in range(tests)
                ]
                at_margin += passed(evaluate(margin_series, looks, ALPHA, MARGIN))
                same = [bench_series(rng, looks[-1], 0.0, cv, f"t{i}", noise) for i in range(tests)]
                equal += passed(evaluate(same, looks, ALPHA, MARGIN))
                equal_two_sided += passed(evaluate(same, looks, ALPHA, MARGIN, NO_CHANGE_GATE))
            what = f"{tests} test(s), CV {cv:.0%} {noise}"
            cells.append(
                Cell(
                    "bench not slower, passed at 1 − δ",
                    f"{what}: slower by δ passed",
                    at_margin / runs,
                    ALPHA,
                    runs,
                )
            )
            cells.append(info("bench not slower, power", f"{what}: A/A passed", equal / runs))
            cells.append(
                info("bench no-change, power", f"{what}: A/A passed (gate no-change)", equal_two_sided / runs)
            )
    return cells


#: (δ, tests): the default plan's margin with one and four tests, the example's full and quick profiles.
NO_CHANGE_CASES = ((0.03, 1), (0.03, 4), (0.05, 6), (0.10, 4))
PAIR_GRID = (12, 16, 20, 24, 32, 40, 48, 64, 96, 128)


def no_change(runs: int) -> list[Cell]:
    """The fewest `max_pairs` (two looks) with which an A/A bench passes in at least 90 % of runs,
    by unit CV (the SD of a unit's log median; the report's pair noise is about √2 times it):
    under the default gate (not slower by more than δ) and under `gate = "no-change"` (every
    test NO CHANGE). At most 200 runs per cell: a count, not a rate with a target."""
    cells: list[Cell] = []
    rng = np.random.default_rng(20261205)
    runs = min(runs, 200)
    for gate, name in ((NO_CHANGE_GATE, "NO CHANGE"), (NOT_SLOWER, "PASS (not slower)")):
        for margin, tests in NO_CHANGE_CASES:
            for cv in (0.01, 0.02, 0.03, 0.05):
                needed = math.inf
                for pairs in PAIR_GRID:
                    looks = looks_for(ALPHA, tests, pairs)
                    hits = 0
                    for _ in range(runs):
                        series = [bench_series(rng, looks[-1], 0.0, cv, f"t{i}") for i in range(tests)]
                        outcomes = evaluate(series, looks, ALPHA, margin, gate)
                        hits += (
                            passed(outcomes)
                            if gate == NOT_SLOWER
                            else all(o.finding == NO_CHANGE for o in outcomes)
                        )
                    if hits >= 0.9 * runs:
                        needed = pairs
                        break
                label = f"δ {margin:.0%}, {tests} test(s), unit CV {cv:.0%}: max_pairs for {name} ≥ 0.9"
                cells.append(info("A/A pairs", label, needed, count=True))
    return cells


# --- numerics -------------------------------------------------------------------------------


def lognormal_mean(rng: np.random.Generator, sigma: float, mean: float, n: int) -> np.ndarray:
    """Lognormal values of shape σ scaled to `mean`."""
    return mean * rng.lognormal(-(sigma**2) / 2, sigma, n)


NI_MODELS = (
    "near-normal",
    "multiplicative",
    "multiplicative, ε σ 0.5",
    "additive",
    "additive, Pareto",
    "right tail",
    "left tail",
    "both tails",
    "autocorrelated",
    "near-normal, AR(1) 0.8",
    "sawtooth",
)


def ni_chunks(
    rng: np.random.Generator, model: str, chunks: int, excess: float
) -> tuple[np.ndarray, np.ndarray]:
    """(KL_P, KL_C) chunk means, E KL_P = 1 and E KL_C = 1 + `excess`.

    A chunk hard for one build is hard for the other: both share the chunk's difficulty (pinned's
    chunk mean, lognormal σ 0.3 near-normal, Pareto (shape 2.5) for "additive, Pareto", else
    lognormal σ 1.5), and the candidate's is pinned's times a noise ε (lognormal σ 0.05, mean 1),
    plus, by model, the excess: multiplicative (every chunk (1 + excess) times worse; with ε of
    σ 0.5 the differences are heavy-tailed on both sides), additive (the candidate repeats
    pinned's error exactly and adds damage of its own, independent of the chunk's difficulty: a
    lognormal σ 1 of mean `excess`), right tail (the excess from a few chunks much worse: a
    lognormal σ 1.5 of mean `excess`), left tail (every chunk worse by excess + 0.05, a few much
    better: 0.05 times a lognormal σ 1.5 of mean 1 taken off), both tails (the right and the left
    at once; also on the sawtooth's chunks), autocorrelated (multiplicative, AR(1) in chunk order),
    near-normal AR(1) (the example's chunk shape, difficulty and noise AR(1) φ 0.8)."""
    if model == "additive, Pareto":
        pinned = (rng.pareto(2.5, chunks) + 1) * (1.5 / 2.5)  # Lomax + 1 scaled to mean 1
    elif model == "autocorrelated":
        # Consecutive chunks of one text are alike: log-difficulty AR(1), φ 0.8, σ 1.5, and the
        # candidate's noise correlated the same way.
        pinned = np.exp(1.5 * ar1(rng, chunks, 0.8) - 1.125)
        return pinned, (1 + excess) * pinned * np.exp(0.2 * ar1(rng, chunks, 0.8) - 0.02)
    elif model == "near-normal, AR(1) 0.8":
        # The example's shape (chunk-mean log-SD 0.25, the candidate's noise 0.1) with chunks of a
        # few long documents: difficulty and noise both AR(1) with φ 0.8 in chunk order.
        pinned = np.exp(0.25 * ar1(rng, chunks, 0.8) - 0.03125)
        return pinned, (1 + excess) * pinned * np.exp(0.1 * ar1(rng, chunks, 0.8) - 0.005)
    elif model == "sawtooth":
        # Difficulty that climbs tenfold over 8 chunks and falls back (a text of sections whose
        # later parts are harder), times lognormal noise σ 0.5, normalised to mean 1.
        tooth = 10 ** (np.arange(chunks) % 8 / 7)
        pinned = tooth / tooth.mean() * lognormal_mean(rng, 0.5, 1.0, chunks)
    else:
        pinned = lognormal_mean(rng, 0.3 if model == "near-normal" else 1.5, 1.0, chunks)
    if model.startswith("additive"):
        return pinned, pinned + excess * lognormal_mean(rng, 1.0, 1.0, chunks)
    noisy = pinned * lognormal_mean(rng, 0.5 if model.endswith("0.5") else 0.05, 1.0, chunks)
    right = excess * lognormal_mean(rng, 1.5, 1.0, chunks)
    left = excess + 0.05 * (1 - lognormal_mean(rng, 1.5, 1.0, chunks))
    if model.startswith(("near-normal", "multiplicative")):
        return pinned, (1 + excess) * noisy
    if model == "right tail":
        return pinned, noisy + right
    if model == "left tail":
        return pinned, noisy + left
    return pinned, noisy + (right + left) / 2


def ni_outcome(
    pinned: np.ndarray, candidate: np.ndarray, seed: int, resamples: int
) -> tuple[str, str, float, float]:
    """(verdict, the former rule's verdict, guarded bound − θ̂, BCa bound − θ̂): the verdict as
    the judge's non-inferiority decides it (`qualify.numerics.noninferiority`: the margin inside
    the test), and as it was decided before, a bound on θ against δ estimated from the same data
    (FAIL whenever θ̂ > δ̂)."""
    chunks = len(pinned)
    sizes = np.full(chunks, 512.0)
    d = (candidate - (1 + DEFAULT_NI_MARGIN) * pinned) * 512
    tests = margin_tests({"margin": ("", d)}, sizes, n_resamples=resamples, seed=seed)
    ratio = RatioOfSums((candidate - pinned) * 512, sizes)
    b = mean_bound(ratio, chunks, side="upper", seed=seed, n_resamples=resamples, name="noninferiority")
    bca = bca_bound(ratio, chunks, side="upper", seed=seed, n_resamples=resamples)
    delta = noninferiority_delta(DEFAULT_NI_MARGIN, float(pinned.mean()), None)
    former = "FAIL" if b.estimate > delta else "INCONCLUSIVE" if b.bound > delta else "PASS"
    return decide(tests), former, b.bound - b.estimate, bca.bound - bca.estimate


def coverage(
    rng: np.random.Generator, sigma: float, chunks: int, sets: int, resamples: int
) -> tuple[float, float]:
    """How often the judged 95 % upper bound on a mean (`mean_bound`: BCa, at least Cantelli's)
    and BCa alone cover the truth, for lognormal chunk means of shape σ."""
    covered = bca_covered = 0
    for k in range(sets):
        ratio = RatioOfSums(lognormal_mean(rng, sigma, 1.0, chunks) * 512, np.full(chunks, 512.0))
        bca = bca_bound(ratio, chunks, side="upper", seed=k, n_resamples=resamples)
        covered += cantelli_guarded(bca, ratio).bound >= 1
        bca_covered += bca.bound >= 1
    return covered / sets, bca_covered / sets


def numerics(runs: int, resamples: int = 2000) -> list[Cell]:
    cells: list[Cell] = []
    rng = np.random.default_rng(20261202)
    sets = 5 * runs  # coverage near 0.95 needs a finer estimate than the rates below
    for sigma in (1.0, 1.5):  # below the stage's smallest chunk count: why it is not smaller
        covered, _ = coverage(rng, sigma, 32, sets, resamples)
        cells.append(info("numerics below min_chunks", f"mean bound coverage, 32 chunks, σ {sigma}", covered))
    for chunks in (MIN_CHUNKS, 100):
        for sigma in (0.3, 0.6, 1.0, 1.5):
            covered, bca_covered = coverage(rng, sigma, chunks, sets, resamples)
            label = f"mean bound coverage, {chunks} chunks, lognormal σ {sigma}"
            cells.append(Cell("numerics mean bound", label, covered, 0.95, sets, coverage=True))
            cells.append(info("numerics BCa alone", f"  BCa alone, {chunks} chunks, σ {sigma}", bca_covered))
        covered = 0
        for k in range(sets):  # near-normal chunks of a few long documents: AR(1) φ 0.8
            ratio = RatioOfSums(np.exp(0.25 * ar1(rng, chunks, 0.8) - 0.03125) * 512, np.full(chunks, 512.0))
            bca = bca_bound(ratio, chunks, side="upper", seed=k, n_resamples=resamples)
            covered += cantelli_guarded(bca, ratio).bound >= 1
        label = f"mean bound coverage, {chunks} chunks, near-normal AR(1) φ 0.8"
        cells.append(Cell("numerics mean bound", label, covered / sets, 0.95, sets, coverage=True))
        for model in NI_MODELS:
            for excess, what in (
                (DEFAULT_NI_MARGIN, "on the margin"),
                (1.1 * DEFAULT_NI_MARGIN, "10 % beyond"),
            ):
                passed = failed = former_passed = 0
                for k in range(runs):
                    pinned, candidate = ni_chunks(rng, model, chunks, excess)
                    outcome = ni_outcome(pinned, candidate, k, resamples)
                    passed += outcome[0] == "PASS"
                    failed += outcome[0] == "FAIL"
                    former_passed += outcome[1] == "PASS"
                label = f"non-inferiority PASS {what}, {chunks} chunks, {model}"
                cells.append(Cell("numerics non-inferiority", label, passed / runs, ALPHA, runs))
                if excess == DEFAULT_NI_MARGIN:  # the truth closest to a FAIL that must not be one
                    label = f"non-inferiority FAIL on the margin, {chunks} chunks, {model}"
                    cells.append(Cell("numerics non-inferiority FAIL", label, failed / runs, ALPHA, runs))
                cells.append(
                    info("numerics former rule", "  the same by the former rule", former_passed / runs)
                )
            passed = failed = former_failed = 0
            width = bca_width = 0.0
            for k in range(runs):
                pinned, candidate = ni_chunks(rng, model, chunks, 0.0)
                verdict, former, w, wb = ni_outcome(pinned, candidate, k, resamples)
                passed += verdict == "PASS"
                failed += verdict == "FAIL"
                former_failed += former == "FAIL"
                width, bca_width = width + w, bca_width + wb
            label = f"non-inferiority FAIL, candidate = pinned, {chunks} chunks, {model}"
            cells.append(Cell("numerics non-inferiority FAIL", label, failed / runs, ALPHA, runs))
            cells.append(info("numerics former rule", "  the same by the former rule", former_failed / runs))
            cells.append(
                info("numerics cost", f"  candidate = pinned, PASS, {chunks} chunks, {model}", passed / runs)
            )
            if bca_width > 0:  # an additive candidate equal to pinned is pinned itself: no width
                cells.append(info("numerics cost", f"  bound − θ̂, guarded / BCa, {chunks} chunks, {model}",
                                  width / bca_width))  # fmt: skip
        rate = 1.2 / (chunks * 512)
        covered = 0
        for k in range(runs):
            counts = rng.poisson(rate * 512, chunks).astype(float)
            b = bca_bound(RatioOfSums(counts, np.full(chunks, 512.0), 1e5), chunks, side="upper", seed=k,
                          n_resamples=resamples)  # fmt: skip
            b = with_exact(b, "poisson", int(counts.sum()), chunks * 512, 1e5)
            covered += b.bound >= rate * 1e5
        label = f"rare flips (1.2 expected) coverage, {chunks} chunks"
        cells.append(Cell("numerics rare flips", label, covered / runs, 0.95, runs, coverage=True))
    return cells


MIN_CHUNKS = int(KIND.param("min_chunks").default)
LOOKS = planned_looks(MIN_CHUNKS, 3, 4 * MIN_CHUNKS)  # 48, 96, 192


def ni_looks(
    pinned: np.ndarray, candidate: np.ndarray, seed: int, resamples: int, bound: MeanBound = mean_bound
) -> tuple[str, int]:
    """(verdict, chunks scored) as the stage's looks decide (`qualify.numerics.looks.sequential`,
    the margin inside the test at each look's share of α): chunks beyond the deciding look are
    never scored."""
    sizes = np.full(len(pinned), 512.0)
    d = (candidate - (1 + DEFAULT_NI_MARGIN) * pinned) * 512

    plan = Settings(MIN_CHUNKS, resamples, seed, 1 - ALPHA, 0.1, looks=len(LOOKS))

    def at(n: int, confidence: float) -> str:
        s = plan.at_look(LOOKS, n, confidence)
        sums = {"margin": ("", d[:n])}
        tests = margin_tests(
            sums, sizes[:n], confidence=s.confidence, n_resamples=resamples, seed=seed, bound=bound,
            guard_confidence=s.guard_confidence, stretch=s.stretch,
        )  # fmt: skip
        return decide(tests)

    stop = sequential(LOOKS, len(d), 1 - ALPHA, at, lambda verdict: verdict != "INCONCLUSIVE")
    return stop.outcome, stop.chunks


def numerics_looks(runs: int, resamples: int = 2000) -> list[Cell]:
    """Non-inferiority in looks at 48, 96 and 192 chunks, α/3 at each: wrong PASS and FAIL rates,
    how often equal builds pass, how soon a clear regression (twice the margin) fails, and the
    chunks scored per decision."""
    cells: list[Cell] = []
    rng = np.random.default_rng(20261205)
    total = LOOKS[-1]
    for model in NI_MODELS:
        for excess, what in (
            (DEFAULT_NI_MARGIN, "truth on the margin: PASS"),
            (0.0, "candidate = pinned: FAIL"),
            (3 * DEFAULT_NI_MARGIN, "candidate 30 % worse: FAIL"),
        ):
            outcomes = [ni_looks(*ni_chunks(rng, model, total, excess), k, resamples) for k in range(runs)]
            verdicts = [v for v, _ in outcomes]
            chunks = float(np.mean([n for _, n in outcomes]))
            label = f"looks {'/'.join(map(str, LOOKS))}, {model}, {what}"
            wrong = "PASS" if excess == DEFAULT_NI_MARGIN else "FAIL"
            if excess <= DEFAULT_NI_MARGIN:
                cells.append(Cell("numerics looks", label, verdicts.count(wrong) / runs, ALPHA, runs))
            else:
                cells.append(info("numerics looks power", label, verdicts.count("FAIL") / runs))
            if excess == 0.0:
                cells.append(
                    info("numerics looks power", "  candidate = pinned: PASS", verdicts.count("PASS") / runs)
                )
            cells.append(
                info("numerics looks chunks", "  chunks scored per decision (mean)", chunks, count=True)
            )
    return cells


LARGE = planned_looks(MIN_CHUNKS, 4, 12 * MIN_CHUNKS)  # 48, 96, 192, 576
LARGE_MODELS = ("near-normal", "near-normal, AR(1) 0.8", "right tail", "multiplicative")


def large_looks(
    pinned: np.ndarray, candidate: np.ndarray, seed: int, resamples: int, guard: GuardPlan
) -> tuple[str, int, int]:
    """(verdict, look, chunks scored) of non-inferiority judged in the large corpus's looks with
    the guard planned as `guard` says, the BCa bounds at each look's share of α as the stage's."""
    sizes = np.full(len(pinned), 512.0)
    d = (candidate - (1 + DEFAULT_NI_MARGIN) * pinned) * 512

    def at(n: int, confidence: float) -> str:
        guard_confidence, stretch = guard.at(n)
        tests = margin_tests(
            {"margin": ("", d[:n])}, sizes[:n], confidence=confidence, n_resamples=resamples, seed=seed,
            guard_confidence=guard_confidence, stretch=stretch,
        )  # fmt: skip
        return decide(tests)

    stop = sequential(LARGE, len(d), 1 - ALPHA, at, lambda verdict: verdict != "INCONCLUSIVE")
    return stop.outcome, stop.look, stop.chunks


def numerics_large(runs: int, resamples: int = 2000) -> list[Cell]:
    """A corpus of 576 chunks judged in looks at 48, 96, 192 and 576: the guard as the plan
    chooses it (`guard_plan`: "first apart", 1 − α/5 at the first look, 1 − 4α/5 stretched by
    √(576/n) at the others) against the stretched guard (1 − α, √(576/n)) and the split one
    (1 − α/4 at every look), on the same data sets: wrong PASS and FAIL with the truth on the
    margin and for equal builds, how often equal builds PASS and at the first look, and the chunks
    scored."""
    cells: list[Cell] = []
    plans = {
        "planned": guard_plan(LARGE, 1 - ALPHA),
        "stretched": GuardPlan("stretched", 1 - ALPHA, LARGE),
        "split": GuardPlan("split", 1 - ALPHA, LARGE),
    }
    rng = np.random.default_rng(20261206)
    for model in LARGE_MODELS:
        for excess, what in (
            (DEFAULT_NI_MARGIN, "truth on the margin: PASS"),
            (0.0, "candidate = pinned: FAIL"),
        ):
            data = [ni_chunks(rng, model, LARGE[-1], excess) for _ in range(runs)]
            for name, guard in plans.items():
                outcomes = [large_looks(*data[k], k, resamples, guard) for k in range(runs)]
                verdicts = [v for v, _, _ in outcomes]
                label = f"looks {'/'.join(map(str, LARGE))}, {guard.shape} guard, {model}, {what}"
                wrong = "PASS" if excess == DEFAULT_NI_MARGIN else "FAIL"
                gate = "numerics large corpus" if name == "planned" else f"numerics large corpus, {name}"
                cells.append(Cell(gate, label, verdicts.count(wrong) / runs, ALPHA, runs))
                if excess == 0.0:
                    first = sum(v == "PASS" and look == 1 for v, look, _ in outcomes) / runs
                    cells.append(
                        info(gate + " power", "  candidate = pinned: PASS", verdicts.count("PASS") / runs)
                    )
                    cells.append(info(gate + " power", "  ... PASS at the first look (48)", first))
                chunks = float(np.mean([n for _, _, n in outcomes]))
                cells.append(
                    info(gate + " chunks", "  chunks scored per decision (mean)", chunks, count=True)
                )
    return cells


def student_bound(
    statistic: RatioOfSums, n_units: int, *, side: Side, confidence: float, **_: object
) -> BootstrapBound:
    """A bound a textbook would take: the estimate ± Student's t quantile × the linearised standard
    error (`cantelli_guarded`'s, with t in place of Cantelli's factor)."""
    from scipy import stats as st

    sums, sizes = statistic.sums, statistic.sizes
    theta = float(sums.sum() / sizes.sum())
    se = float(((sums - theta * sizes) / sizes.mean()).std(ddof=1)) / math.sqrt(n_units)
    t = float(st.t.ppf(confidence, n_units - 1)) * se
    shape = bca_bound(statistic, n_units, side=side, confidence=confidence, n_resamples=100)
    return replace(shape, estimate=theta, bound=theta + t if side == "upper" else theta - t)


def bca_alone(statistic: RatioOfSums, n_units: int, **kwargs: object) -> BootstrapBound:
    """BCa with no guard."""
    kwargs = {k: v for k, v in kwargs.items() if k not in ("guard_confidence", "stretch")}
    return bca_bound(statistic, n_units, **kwargs)  # type: ignore[arg-type]


BOUNDS: dict[str, MeanBound] = {
    "Student t": student_bound,
    "BCa alone": bca_alone,
    "BCa, at least Cantelli (judged)": mean_bound,
}


def numerics_bounds(runs: int, resamples: int = 2000) -> list[Cell]:
    """Which bound non-inferiority judges: for each candidate bound, at the stage's smallest chunk
    count, the worst PASS with the truth on the margin over every chunk model, and how often two
    equal builds pass (near-normal chunks, and the median over the models)."""
    cells: list[Cell] = []
    for name, bound in BOUNDS.items():
        rng = np.random.default_rng(20261206)
        on_margin: dict[str, float] = {}
        equal: dict[str, float] = {}
        for model in NI_MODELS:
            for excess, into in ((DEFAULT_NI_MARGIN, on_margin), (0.0, equal)):
                passed = 0
                for k in range(runs):
                    pinned, candidate = ni_chunks(rng, model, MIN_CHUNKS, excess)
                    d = (candidate - (1 + DEFAULT_NI_MARGIN) * pinned) * 512
                    tests = margin_tests(
                        {"margin": ("", d)},
                        np.full(MIN_CHUNKS, 512.0),
                        n_resamples=resamples,
                        seed=k,
                        bound=bound,
                    )
                    passed += decide(tests) == "PASS"
                into[model] = passed / runs
        worst_model = max(on_margin, key=lambda m: on_margin[m])
        cells.append(
            info(
                "numerics bound choice",
                f"{name}: worst PASS on the margin ({worst_model})",
                on_margin[worst_model],
            )
        )
        cells.append(
            info("numerics bound choice", f"  {name}: equal builds PASS, near-normal", equal["near-normal"])
        )
        cells.append(
            info(
                "numerics bound choice",
                f"  {name}: equal builds PASS, median model",
                float(np.median(list(equal.values()))),
            )
        )
    return cells


# --- soak -----------------------------------------------------------------------------------


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """Stationary AR(1) of unit variance."""
    e = rng.normal(size=n + 200)
    y = np.zeros(n + 200)
    for i in range(1, n + 200):
        y[i] = phi * y[i - 1] + e[i]
    return y[200:] * math.sqrt(1 - phi * phi)


BUDGET = 8.0  # MiB over the soak, with window noise of SD 1 MiB
RULE = MEMORY_RULES[0]  # anonymous memory, budget max_rss_growth_mib
LIMITS = {"max_rss_growth_mib": BUDGET, "leak_margin": 0.0}


def shape(rng: np.random.Generator, name: str, n: int) -> np.ndarray:
    """A candidate's memory in noise SDs, window by window."""
    i = np.arange(n)
    if name == "sawtooth":  # climbs 8 SD over 10 windows, then freed
        return 8.0 / 9 * ((i + rng.integers(10)) % 10)
    if name == "sine":
        return 4.0 * np.sin(2 * np.pi * (i / 24 + rng.uniform()))
    if name.startswith("step"):
        return float(name.removeprefix("step ")) * (i >= rng.integers(n // 4, 3 * n // 4))
    if name.startswith("linear"):
        return float(name.removeprefix("linear ")) * BUDGET * i / n
    if name.startswith("walk"):
        return np.cumsum(rng.normal(float(name.removeprefix("walk ")) * BUDGET / n, 0.3, n))
    raise ValueError(name)


def judged(rng: np.random.Generator, name: str, n: int, phi: float) -> tuple[str, bool]:
    """(finding, interval inverted) of one simulated candidate against a flat pinned."""
    index = pd.Index(np.arange(n) * 60.0 + 30.0)  # 1-minute windows
    candidate = pd.DataFrame({"anon_mib": shape(rng, name, n) + ar1(rng, n, phi)}, index=index)
    pinned = pd.DataFrame({"anon_mib": ar1(rng, n, phi)}, index=index)
    c = trend("anon_mib", "candidate", candidate, 0.01)
    verdict = judge_series(RULE, c, trend("anon_mib", "pinned", pinned, 0.01), LIMITS, n * 60.0)
    low, high = c.slope_bounds()
    return verdict.finding, bool(low > high)


def soak(runs: int) -> list[Cell]:
    cells: list[Cell] = []
    rng = np.random.default_rng(20261203)
    for phi in (0.0, 0.5, 0.8):
        for n in (12, 24, 48, 96):
            rising = covered = 0
            index = pd.Index(np.arange(n) * 60.0 + 30.0)
            for _ in range(runs):
                t = trend(
                    "anon_mib", "candidate", pd.DataFrame({"anon_mib": ar1(rng, n, phi)}, index=index), 0.01
                )
                rising += t.rising or (t.test is not None and t.test.significant)
                low, high = t.slope_bounds()
                covered += low <= 0 <= high
            cells.append(
                Cell("soak trend called", f"false trend, φ {phi}, {n} windows", rising / runs, 0.01, runs)
            )
            label = f"slope interval coverage, φ {phi}, {n} windows"
            cells.append(Cell("soak slope interval", label, covered / runs, 0.95, runs, coverage=True))
    for name in ("sawtooth", "sine", "step 8", "step 32"):
        for n in (48, 96):
            for phi in (0.0, 0.5):
                leaks = inverted = 0
                for _ in range(runs):
                    finding, bad = judged(rng, name, n, phi)
                    leaks += finding == LEAK
                    inverted += bad
                what = f"{name}, {n} windows, φ {phi}"
                cells.append(Cell("soak LEAK without a leak", f"{what}: LEAK", leaks / runs, 0.01, runs))
                cells.append(
                    Cell("soak interval inverted", f"{what}: low > high", inverted / runs, 0.0, runs)
                )
    for name in ("linear 1", "linear 1.5", "linear 2", "linear 4", "walk 2"):
        for n in (24, 96):
            for phi in (0.0, 0.5):
                leaks = sum(judged(rng, name, n, phi)[0] == LEAK for _ in range(runs))
                label = f"{name} × budget, {n} windows, φ {phi}: LEAK (power)"
                cells.append(info("soak power", label, leaks / runs))
    return cells


def noise_of(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    """Window noise of unit SD: normal, Student-t (3 df), AR(1) ("ar0.8") or a sawtooth of 8 SD
    climbed over 10 windows and freed, on top of normal noise."""
    if kind == "t3":
        return rng.standard_t(3, n) / math.sqrt(3.0)
    if kind.startswith("ar"):
        return ar1(rng, n, float(kind.removeprefix("ar")))
    if kind == "sawtooth":
        return shape(rng, "sawtooth", n) + rng.normal(size=n)
    return rng.normal(size=n)


def bounded_outcome(rng: np.random.Generator, n: int, stretch: float, leak: float, kind: str) -> str:
    """The soak's outcome for one simulated series under `bound_budgets`: LEAK, PASS (no leak and
    the growth over the horizon bounded within the budget) or INCONCLUSIVE. `n` one-minute
    windows, a horizon `stretch` times the soak, a linear leak of `leak` budgets over the horizon."""
    horizon = n * 60.0 * stretch
    index = pd.Index(np.arange(n) * 60.0 + 30.0)
    rise = leak * BUDGET * (index.to_numpy() / horizon)
    candidate = pd.DataFrame({"anon_mib": rise + noise_of(rng, n, kind)}, index=index)
    pinned = pd.DataFrame({"anon_mib": noise_of(rng, n, kind)}, index=index)
    c = trend("anon_mib", "candidate", candidate, 0.01)
    verdict = judge_series(RULE, c, trend("anon_mib", "pinned", pinned, 0.01), LIMITS, horizon)
    if verdict.finding == LEAK:
        return "LEAK"
    return "PASS" if not _unbounded([verdict], horizon) else "INCONCLUSIVE"


def soak_bound(runs: int) -> list[Cell]:
    """`bound_budgets`: a leak of exactly the budget over the horizon must not PASS more often
    than the slope interval's 5 % (its upper end misses from below); how often a flat series is
    bounded (PASS) is shown beside it."""
    cells: list[Cell] = []
    rng = np.random.default_rng(20261204)
    for kind in ("normal", "t3", "ar0.5", "ar0.8", "sawtooth"):
        for n, stretch in ((21, 6.2), (48, 1.0), (96, 1.0), (96, 4.0)):
            what = f"{kind}, {n} windows, horizon {stretch:g}× the soak"
            passed = sum(bounded_outcome(rng, n, stretch, 1.0, kind) == "PASS" for _ in range(runs))
            cells.append(
                Cell("soak bound: leak passed", f"budget leak, {what}: PASS", passed / runs, 0.05, runs)
            )
            flat = sum(bounded_outcome(rng, n, stretch, 0.0, kind) == "PASS" for _ in range(runs))
            cells.append(info("soak bound: flat bounded", f"flat, {what}: PASS", flat / runs))
    return cells


SECTIONS: dict[str, Callable[[int], list[Cell]]] = {
    "bench": bench,
    "bench-sets": bench_sets,
    "no-change": no_change,
    "not-slower": not_slower,
    "numerics": numerics,
    "numerics-looks": numerics_looks,
    "numerics-large": numerics_large,
    "numerics-bounds": numerics_bounds,
    "soak": soak,
    "soak-bound": soak_bound,
}


def worst(cells: Iterable[Cell]) -> list[str]:
    """The worst cell of each gate: the highest false-alarm rate, the lowest coverage."""
    by_gate: dict[str, Cell] = {}
    for c in cells:
        if c.nominal is None:
            continue
        current = by_gate.get(c.gate)
        if current is None or (
            c.measured < current.measured if c.coverage else c.measured > current.measured
        ):
            by_gate[c.gate] = c
    # The standard error of a measured 0 (or 1) is taken at one event in the runs, not as 0.
    return [
        f"  {g:<28} {c.measured:.3f} ± {se(min(max(c.measured, 1 / c.runs), 1 - 1 / c.runs), c.runs):.3f}  "
        f"(nominal {c.nominal}, {c.label.strip()})"
        for g, c in by_gate.items()
        if c.nominal is not None
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="simulated data sets per cell")
    parser.add_argument("--only", choices=tuple(SECTIONS), action="append")
    parser.add_argument("--summary", action="store_true", help="end with the worst cell of each gate")
    args = parser.parse_args()
    every: list[Cell] = []
    for name, fn in SECTIONS.items():
        if args.only is None or name in args.only:
            start = time.perf_counter()
            cells = fn(args.runs)
            print(name)
            print("\n".join(c.line() for c in cells))
            print(f"  ({args.runs} runs per cell, {time.perf_counter() - start:.0f} s)\n", flush=True)
            every += cells
    if args.summary:
        print("worst cell of each gate (± the Monte Carlo standard error of the measured rate):")
        print("\n".join(worst(every)))
    missed = [c for c in every if not c.ok]
    if missed:
        print(f"{len(missed)} cell(s) MISSED their target")


if __name__ == "__main__":
    main()
