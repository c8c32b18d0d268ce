"""The long-run SD the numerics guard bounds a mean with (`qualify.numerics.bounds.long_run_sd`):
the plain SD for independent chunks, larger where chunks are autocorrelated in corpus order,
never smaller than the plain SD. Series simulated here, apart from the code under test."""

from __future__ import annotations

import numpy as np
import pytest
from chunkseries import ar1

from qualify.numerics.bounds import long_run_sd


def test_independent_chunks_keep_about_their_plain_sd() -> None:
    rng = np.random.default_rng(1)
    ratios = [long_run_sd(x)[0] / float(x.std(ddof=1)) for x in rng.normal(size=(300, 48))]
    assert 1.0 <= float(np.mean(ratios)) <= 1.05


def test_autocorrelated_chunks_get_a_wider_sd_the_stronger_the_dependence() -> None:
    rng = np.random.default_rng(2)
    means = {}
    for phi in (0.5, 0.8):
        got = [long_run_sd(ar1(rng, 48, phi)) for _ in range(300)]
        means[phi] = float(np.mean([sd for sd, _ in got]))
        assert all(window > 0 for _, window in got[:50]) or phi < 0.8
    # The truth, √((1 + φ)/(1 − φ)): 1.73 and 3.0; a short series sees part of it.
    assert 1.2 < means[0.5] < 1.8
    assert means[0.8] > means[0.5] and means[0.8] > 1.6


def test_alternating_chunks_never_narrow_the_bound() -> None:
    x = np.tile([1.0, -1.0], 24) + np.random.default_rng(3).normal(0, 0.1, 48)
    sd, _ = long_run_sd(x)
    assert sd == float(x.std(ddof=1))


def test_too_few_or_constant_chunks_fall_back_to_the_plain_sd() -> None:
    sd, window = long_run_sd(np.array([1.0, 2.0, 4.0]))
    assert sd == pytest.approx(float(np.std([1.0, 2.0, 4.0], ddof=1))) and window == 0
    assert long_run_sd(np.full(10, 2.0)) == (0.0, 0)
