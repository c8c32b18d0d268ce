"""Chunk series for the numerics tests, made apart from the code under test."""

from __future__ import annotations

import numpy as np


def ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """A stationary AR(1) series of unit variance (its own generator: the judge shares none of it)."""
    e = rng.normal(size=n + 200)
    y = np.zeros(n + 200)
    for i in range(1, n + 200):
        y[i] = phi * y[i - 1] + e[i]
    return y[200:] * (1 - phi * phi) ** 0.5
