"""Non-inferiority of the candidate to pinned, with the margin inside the test.

The question: is θ = mean KL(ref‖candidate) − KL(ref‖pinned) per token at most δ = max(ρ × mean
KL(ref‖pinned), 3 × floor), floor = mean |KL(pinned‖pinned.2)|? Both sides of δ are estimated
from the same chunks as θ. Comparing a bound on θ with an estimated δ leaves δ's own
uncertainty out of the test: when the candidate repeats pinned's error and adds damage of its
own, such a test passed 6–10 % of data sets with the truth on the margin, where 5 % was meant.

So each way of stating the margin becomes one per-token quantity that holds it, and the test
bounds that quantity's mean, whose truth is 0 exactly on the margin:

- ``margin``: D = KL_C − (1 + ρ)·KL_P (θ ≤ ρ·mean KL_P ⟺ mean D ≤ 0);
- ``floor`` (when pinned was scored twice and the two scorings differ): D = KL_C − KL_P −
  3·|KL(P‖P2)|.

Each mean is bounded by `qualify.numerics.bounds.mean_bound` (BCa over chunks, at least as wide
as Cantelli's) on both sides. The verdict (`decide`):

- PASS when some quantity's upper bound is at most 0: non-inferiority shown. With two
  quantities each upper bound is taken at 1 − α/2, so that passing by either keeps the error of
  a PASS on the margin at α;
- FAIL when every quantity's lower bound is above 0: inferiority shown, against every statement
  of the margin (each at 1 − α: the candidate is non-inferior if either mean is ≤ 0, and that
  one's bound is wrong with probability α at most);
- INCONCLUSIVE otherwise: the data cannot tell at the stated confidence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from qualify.numerics.bootstrap import DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES, BootstrapBound, RatioOfSums
from qualify.numerics.bounds import mean_bound

MeanBound = Callable[..., BootstrapBound]
FLOOR_FACTOR = 3.0  # δ is at least 3 × the pinned arm's run-to-run floor
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class MarginTest:
    """One statement of the margin inside the test: bounds on the mean of D, its truth 0 exactly
    on the margin."""

    name: str  # "margin" or "floor"
    what: str  # D in words, for the report
    upper: BootstrapBound
    lower: BootstrapBound


def quantities(
    kl_candidate: F64, kl_pinned: F64, rho: float, floor: F64 | None
) -> dict[str, tuple[str, F64]]:
    """The per-token D of each statement of the margin (see the module)."""
    out = {"margin": (f"KL_C − (1 + {rho:g})·KL_P", kl_candidate - (1 + rho) * kl_pinned)}
    # A rerun that scored every token exactly as pinned did (a deterministic engine) has no floor:
    # δ is then the ρ margin alone, and testing θ ≤ 0 beside it would only spend half the error.
    if floor is not None and np.any(floor != 0):
        out["floor"] = (
            f"KL_C − KL_P − {FLOOR_FACTOR:g}·|KL(P‖P2)|",
            kl_candidate - kl_pinned - FLOOR_FACTOR * np.abs(floor),
        )
    return out


def margin_tests(
    sums: Mapping[str, tuple[str, F64]],
    sizes: F64,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    bound: MeanBound = mean_bound,
    guard_confidence: float | None = None,
    stretch: float = 1.0,
) -> tuple[MarginTest, ...]:
    """Both bounds on each quantity's mean, from its per-chunk sums (`sums`: name -> (what,
    sums)) and the chunks' token counts; the upper ones at 1 − α/k for k quantities. At a look
    (`qualify.numerics.looks`) `confidence` is the look's share and the Cantelli guard is at
    `guard_confidence`, stretched by `stretch` (`qualify.numerics.bounds.cantelli_guarded`).
    `bound` is the judged one; `benchmarks/calibration.py` passes others to show why."""
    alpha = 1 - confidence
    upper_confidence = 1 - alpha / len(sums)
    guard = confidence if guard_confidence is None else guard_confidence
    guards = {"upper": 1 - (1 - guard) / len(sums), "lower": guard}
    tests = []
    for name, (what, chunk_sums) in sums.items():
        ratio = RatioOfSums(np.asarray(chunk_sums, dtype=np.float64), np.asarray(sizes, dtype=np.float64))
        n, label = len(chunk_sums), f"noninferiority {name}"
        upper, lower = (
            bound(
                ratio,
                n,
                side=side,
                confidence=upper_confidence if side == "upper" else confidence,
                n_resamples=n_resamples,
                seed=seed,
                name=label,
                guard_confidence=guards[side],
                stretch=stretch,
            )
            for side in ("upper", "lower")
        )
        tests.append(MarginTest(name, what, upper, lower))
    return tuple(tests)


def decide(tests: tuple[MarginTest, ...]) -> str:
    """PASS, FAIL or INCONCLUSIVE (see the module)."""
    if any(t.upper.bound <= 0 for t in tests):
        return "PASS"
    if tests and all(t.lower.bound > 0 for t in tests):
        return "FAIL"
    return "INCONCLUSIVE"
