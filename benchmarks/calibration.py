"""How often the gates are wrong: seeded simulations through qualify's own judges.

    python benchmarks/calibration.py [--runs 400] [--only bench|numerics|soak]

Prints, next to each nominal rate, the rate measured on simulated data where the truth is
known, with its Monte Carlo standard error (√(p(1 − p)/runs) at the nominal p):
- bench (`qualify.bench.judge.evaluate`, the planned looks and Holm levels the schedule uses):
  A/A false alarms (FASTER or SLOWER) per test and family-wise at 1/3/5 % unit CV for 1, 2 and
  4 tests; power to call a slowdown of 2δ a regression; a slowdown of δ/2 and of δ called a
  regression (δ = 3 %, α = 0.05, 16 pairs at most, two looks);
- bench across candidates (a run set: `qualify.core.designs`' Williams order, each candidate's
  units read through `candidate_view` and `series_from` as its judge reads them, `evaluate` at
  α/k): 1, 2 and 3 candidates all equal to pinned, under a slow drift and a 1 % penalty on every
  unit's position after the first in its block; the chance that any candidate, on any test, is
  called FASTER or SLOWER (family-wise over the set), and that any is called a regression;
- numerics (`qualify.numerics.bounds`, as `judged_bounds` and the non-inferiority gate call
  it: BCa, guarded by Cantelli's bound on skewed chunks): coverage of the 95 % upper bound on a
  per-token mean whose chunk means are lognormal
  (σ 0.3/0.6/1.0) at 30 and 100 chunks, non-inferiority passed when the truth sits exactly on
  the margin, and coverage of the bound on rare confident flips (about 1.2 expected);
- soak (`qualify.soak.trend`): a trendless AR(1) series (φ 0/0.5/0.8, 12 to 96 windows) called
  rising at α = 1 %, and the coverage of the 95 % slope interval.

Targets: a false-alarm rate at or below nominal within two standard errors; a coverage at or
above nominal less one point.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qualify.bench.design import candidate_view
from qualify.bench.judge import FASTER, SLOWER, Series, evaluate, series_from
from qualify.core.designs import block_order
from qualify.numerics.bootstrap import RatioOfSums, bca_bound
from qualify.numerics.bounds import skew_guarded, with_exact
from qualify.soak.trend import trend
from qualify.stats import abtests

ALPHA, MARGIN = 0.05, 0.03


def se(p: float, runs: int) -> float:
    return math.sqrt(p * (1 - p) / runs)


def row(label: str, measured: float, nominal: float, runs: int, *, coverage: bool = False) -> str:
    if coverage:
        ok = measured >= nominal - 0.01
        target = f"≥ {nominal - 0.01:.3f}"
    else:
        ok = measured <= nominal + 2 * se(nominal, runs)
        target = f"≤ {nominal:.3f} (+{2 * se(nominal, runs):.3f})"
    return f"  {label:<52} {measured:6.3f}   target {target:<22} {'ok' if ok else 'MISSED'}"


def bench_series(rng: np.random.Generator, pairs: int, effect: float, cv: float, label: str) -> Series:
    """Unit log-medians in ABBA order; candidate = pinned × (1 + effect); lognormal unit noise."""
    values = []
    for _ in range(pairs):
        pinned = math.log(100.0) + rng.normal(0, cv)
        candidate = math.log(100.0) + math.log(1 + effect) + rng.normal(0, cv)
        values.append((pinned, candidate))
    return Series(label, "t/s", True, tuple(values))


def bench(runs: int) -> list[str]:
    out = ["bench: A/A false alarms, power and false regressions (δ = 3 %, α = 0.05)"]
    rng = np.random.default_rng(20261201)
    for tests in (1, 2, 4):
        looks = abtests.planned_looks(abtests.min_pairs(abtests.first_holm_level(ALPHA, tests, 2)), 16, 2)
        for cv in (0.01, 0.03, 0.05):
            per_test = family = 0
            for _ in range(runs):
                series = [bench_series(rng, looks[-1], 0.0, cv, f"t{i}") for i in range(tests)]
                found = [o.finding in (FASTER, SLOWER) for o in evaluate(series, looks, ALPHA, MARGIN)]
                per_test += sum(found)
                family += any(found)
            out.append(
                row(f"A/A {tests} test(s), CV {cv:.0%}: per test", per_test / (runs * tests), ALPHA, runs)
            )
            out.append(row(f"A/A {tests} test(s), CV {cv:.0%}: family-wise", family / runs, ALPHA, runs))
    looks = abtests.planned_looks(abtests.min_pairs(abtests.first_holm_level(ALPHA, 1, 2)), 16, 2)
    for cv in (0.01, 0.03):
        for effect, name in ((-2 * MARGIN, "power at 2δ slower"), (-MARGIN / 2, "regression at δ/2"),
                             (-MARGIN, "regression at δ")):  # fmt: skip
            hits = 0
            for _ in range(runs):
                [o] = evaluate([bench_series(rng, looks[-1], effect, cv, "t")], looks, ALPHA, MARGIN)
                hits += o.finding == SLOWER and o.regression
            if name.startswith("power"):
                out.append(
                    f"  {name + f', CV {cv:.0%}':<52} {hits / runs:6.3f}   (no target: shows the cost)"
                )
            else:
                out.append(row(f"{name}, CV {cv:.0%}", hits / runs, ALPHA, runs))
    return out


def simulated_set(
    rng: np.random.Generator, roles: list[str], blocks: int, tests: int, cv: float, *, balanced: bool = True
) -> tuple[list[dict[str, object]], dict[int, dict[str, tuple[float, ...]]]]:
    """Units of a run set's bench in Williams order: every arm at the same speed, lognormal unit
    noise of `cv`, a random-walk drift, and each position after the first in a block 1 % slower."""
    units: list[dict[str, object]] = []
    values: dict[int, dict[str, tuple[float, ...]]] = {}
    level = 0.0
    for block in range(1, blocks + 1):
        for position, role in enumerate(block_order(roles, block) if balanced else roles):
            level += rng.normal(0, 0.002)
            index = len(units)
            units.append({"index": index, "role": role, "phase": "pair", "pair": block, "ok": True})
            centre = 100.0 * math.exp(level + rng.normal(0, cv)) * (0.99 if position else 1.0)
            values[index] = {f"t{i}": tuple(centre * (1 + rng.normal(0, 0.002, 3))) for i in range(tests)}
    return units, values


def bench_sets(runs: int) -> list[str]:
    out = ["bench across candidates: A/A sets, α = 0.05 split over k members (δ = 3 %, 16 blocks, two looks)"]
    rng = np.random.default_rng(20261204)
    for members in (1, 2, 3):
        for tests in (1, 2):
            alpha = ALPHA / members
            first = abtests.min_pairs(abtests.first_holm_level(alpha, tests, 2))
            looks = abtests.planned_looks(first, 16, 2)
            roles = ["pinned", *(f"c{k}" for k in range(members))]
            kinds = {f"t{i}": ("t/s", True) for i in range(tests)}
            alarms = regressions = 0
            for _ in range(runs):
                units, values = simulated_set(rng, roles, looks[-1], tests, 0.03)
                found = [
                    o
                    for role in roles[1:]
                    for o in evaluate(
                        series_from(candidate_view(units, role), values, kinds), looks, alpha, MARGIN
                    )
                ]
                alarms += any(o.finding in (FASTER, SLOWER) for o in found)
                regressions += any(o.regression for o in found)
            what = f"{members} candidate(s), {tests} test(s)"
            out.append(row(f"{what}: any FASTER/SLOWER", alarms / runs, ALPHA, runs))
            out.append(row(f"{what}: any regression", regressions / runs, ALPHA, runs))
    # The contrast: the same sets in a fixed order (pinned always first) are not balanced, and
    # the 1 % position penalty alone reads as a slowdown of every candidate.
    alpha, roles = ALPHA / 2, ["pinned", "c0", "c1"]
    looks = abtests.planned_looks(abtests.min_pairs(abtests.first_holm_level(alpha, 1, 2)), 16, 2)
    alarms = 0
    for _ in range(runs):
        units, values = simulated_set(rng, roles, looks[-1], 1, 0.01, balanced=False)
        series = [series_from(candidate_view(units, r), values, {"t0": ("t/s", True)}) for r in roles[1:]]
        alarms += any(
            o.finding in (FASTER, SLOWER) for s in series for o in evaluate(s, looks, alpha, MARGIN)
        )
    out.append(
        f"  {'2 candidates, fixed order (no design), CV 1 %: any':<52} {alarms / runs:6.3f}  (why the design)"
    )
    return out


def numerics(runs: int) -> list[str]:
    out = ["numerics: 95 % upper bounds over chunks (2000 resamples each)"]
    rng = np.random.default_rng(20261202)
    for chunks in (30, 100):
        for sigma in (0.3, 0.6, 1.0):
            truth = math.exp(sigma**2 / 2)
            covered = passed = 0
            for k in range(runs):
                means = rng.lognormal(0, sigma, chunks)
                sizes = np.full(chunks, 512.0)
                ratio = RatioOfSums(means * 512, sizes)
                b = skew_guarded(bca_bound(ratio, chunks, side="upper", seed=k, n_resamples=2000), ratio)
                covered += b.bound >= truth
                passed += b.bound <= truth  # non-inferiority with the truth exactly on the margin δ
            out.append(row(f"mean bound coverage, {chunks} chunks, σ {sigma}", covered / runs, 0.95, runs,
                           coverage=True))  # fmt: skip
            out.append(row(f"non-inferiority passed on the margin, {chunks} chunks, σ {sigma}", passed / runs,
                           0.05, runs))  # fmt: skip
        rate = 1.2 / (chunks * 512)
        covered = 0
        for k in range(runs):
            counts = rng.poisson(rate * 512, chunks).astype(float)
            b = bca_bound(RatioOfSums(counts, np.full(chunks, 512.0), 1e5), chunks, side="upper", seed=k,
                          n_resamples=2000)  # fmt: skip
            b = with_exact(b, "poisson", int(counts.sum()), chunks * 512, 1e5)
            covered += b.bound >= rate * 1e5
        out.append(row(f"rare flips (1.2 expected) coverage, {chunks} chunks", covered / runs, 0.95, runs,
                       coverage=True))  # fmt: skip
    return out


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    e = rng.normal(size=n + 200)
    y = np.zeros(n + 200)
    for i in range(1, n + 200):
        y[i] = phi * y[i - 1] + e[i]
    return y[200:]


def soak(runs: int) -> list[str]:
    out = ["soak: trendless AR(1) window medians, α = 0.01"]
    rng = np.random.default_rng(20261203)
    for phi in (0.0, 0.5, 0.8):
        for n in (12, 24, 48, 96):
            rising = covered = 0
            index = pd.Index(np.arange(n) * 60.0 + 30.0)  # 1-minute windows
            for _ in range(runs):
                windows = pd.DataFrame({"anon_mib": ar1(rng, n, phi)}, index=index)
                t = trend("anon_mib", "candidate", windows, 0.01)
                rising += t.rising or (t.test is not None and t.test.significant)
                low, high = t.slope_bounds()
                covered += low <= 0 <= high
            out.append(row(f"false trend, φ {phi}, {n} windows", rising / runs, 0.01, runs))
            out.append(row(f"slope interval coverage, φ {phi}, {n} windows", covered / runs, 0.95, runs,
                           coverage=True))  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400, help="simulated data sets per cell")
    parser.add_argument("--only", choices=("bench", "bench-sets", "numerics", "soak"))
    args = parser.parse_args()
    for name, fn in (("bench", bench), ("bench-sets", bench_sets), ("numerics", numerics), ("soak", soak)):
        if args.only in (None, name):
            start = time.perf_counter()
            print("\n".join(fn(args.runs)))
            print(f"  ({args.runs} runs per cell, {time.perf_counter() - start:.0f} s)\n")


if __name__ == "__main__":
    main()
