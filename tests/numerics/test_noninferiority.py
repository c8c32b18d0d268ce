"""Non-inferiority with the margin inside the test (`qualify.numerics.noninferiority`), at its
nominal rates in both directions on seeded simulations.

The chunks are simulated, as the calibration benchmark simulates them: nothing here is a build,
and every rate is measured through the functions the judge decides with."""

from __future__ import annotations

import numpy as np
import pytest

from qualify.numerics.noninferiority import decide, margin_tests, quantities

RHO, SIZE, SETS = 0.1, 512.0, 300
LIMIT = 0.05 + 2 * (0.05 * 0.95 / SETS) ** 0.5  # the nominal rate plus two Monte Carlo SDs


def verdict(pinned: np.ndarray, candidate: np.ndarray, seed: int) -> str:
    sums = {"margin": ("", (candidate - (1 + RHO) * pinned) * SIZE)}
    return decide(margin_tests(sums, np.full(len(pinned), SIZE), n_resamples=2000, seed=seed))


@pytest.mark.parametrize("chunks", [32, 100])
def test_an_estimated_margin_lets_no_more_passes_through_than_its_level(chunks: int) -> None:
    """The candidate repeats pinned's error exactly and adds damage of its own, its mean exactly
    the margin (ρ × E KL_P): compared with δ estimated from the same chunks, a bound on θ passed
    about 10 % of these at 32 chunks and 6 % at 100; the margin inside the test, at most 5 %."""
    rng = np.random.default_rng(44)
    passed = 0
    for k in range(SETS):
        pinned = rng.lognormal(-1.125, 1.5, chunks)  # mean 1
        candidate = pinned + RHO * rng.lognormal(-0.5, 1.0, chunks)  # damage of mean ρ
        passed += verdict(pinned, candidate, k) == "PASS"
    assert passed / SETS <= LIMIT, passed


@pytest.mark.parametrize(("chunks", "noise"), [(32, 0.5), (100, 0.5), (32, 0.2)])
def test_equal_builds_fail_no_more_often_than_the_level(chunks: int, noise: float) -> None:
    """Builds equal in truth, chunk KL lognormal σ 1.5 and the candidate's chunk pinned's times
    a lognormal noise: FAIL on the point estimate failed 26 % of these at 32 chunks (σ 0.5);
    FAIL only when inferiority is shown, at most 5 %."""
    rng = np.random.default_rng(45)
    failed = 0
    for k in range(SETS):
        pinned = rng.lognormal(-1.125, 1.5, chunks)
        candidate = pinned * rng.lognormal(-(noise**2) / 2, noise, chunks)
        failed += verdict(pinned, candidate, k) == "FAIL"
    assert failed / SETS <= LIMIT, failed


def test_a_clear_regression_is_shown() -> None:
    """A candidate twice as far from the reference as pinned on every chunk (θ = 10 ρ) FAILs
    nearly always at 32 chunks: the rule that keeps equal builds from failing still decides."""
    rng = np.random.default_rng(46)
    failed = sum(
        verdict(p, 2 * p * rng.lognormal(-0.005, 0.1, 32), k) == "FAIL"
        for k, p in enumerate(rng.lognormal(-0.03, 0.25, (100, 32)))
    )
    assert failed >= 95, failed


def test_the_floor_is_a_second_statement_of_the_margin() -> None:
    """With pinned scored twice, D = KL_C − KL_P − 3·|KL(P‖P2)| is tested beside the ρ margin;
    each upper bound is then taken at 1 − α/2, and a PASS by either is a PASS."""
    kl_p = np.full(64, 0.01)
    kl_c = kl_p + 0.004  # 40 % worse than pinned: far past ρ = 10 %
    rerun = np.full(64, 0.002)  # but within 3 × pinned's own rerun noise
    per_token = quantities(kl_c, kl_p, RHO, rerun)
    assert set(per_token) == {"margin", "floor"}
    assert np.allclose(per_token["margin"][1], 0.004 - 0.001)
    assert np.allclose(per_token["floor"][1], 0.004 - 0.006)
    sums = {n: (w, d.reshape(8, 8).sum(axis=1)) for n, (w, d) in per_token.items()}
    tests = margin_tests(sums, np.full(8, 8.0), n_resamples=500)
    assert {t.name: t.upper.confidence for t in tests} == {"margin": 0.975, "floor": 0.975}
    assert decide(tests) == "PASS"  # by the floor, though the ρ margin alone is exceeded
