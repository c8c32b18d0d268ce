"""Which bench design decides on a host whose speed changes within a second: ck-bench units run
one after another, or a block's units run together on one CPU (`together = true`)?
(README.md, "A host of two speeds")

A seeded simulation through the bench's own judge (`qualify.bench.judge.evaluate`) of the run
set this example runs (pinned, clang19, pinned again as the positive control, the -O0 build;
α = 0.05 shared by three members, Holm across ten tests, looks at 12, 26 and 40 pairs, δ =
10 %, the gate "not slower"), on a host modelled on the 2-core VM that ran it: its speed is one
of two states, each half of the time, switching as a Markov chain whose autocorrelation decays
at RATE per second (the recorded units switched within 0.2 s at times and held a state for
seconds at others: 0.5, 2 and 5 per second are run). In the slow state a test takes SLOWDOWN
times as long (ck-bench's gcc build, both states seen in one run: axpy at n = 1024 0.08 and
0.16 µs, gemm at n = 32 4.4 and 5.7 µs; the others less). On top, independent noise of 1 %
per sample (the spread of a state's samples). Two more hosts: the same states with
heavy-tailed noise (Student's t, two degrees of freedom, at the same scale), and a sawtooth,
a slowdown that grows over 3 s to each test's factor and drops back, with the 1 % noise.

The designs, timed as they run:
- in turn: a unit is a process of 0.37 s (the -O0 build's 0.47 s) taking 5 samples, the roles
  of a block one after another in a Williams order; a unit's value is its samples' median.
- together: the four units of a block start at once on one CPU and take 20 samples each over
  the block's 1.3 s, sample k of every role within about 10 ms of the others' (the recorded
  units switched state at the same sample); a unit's value is the mean of its samples' logs.

It prints, per host, design and rate, the share of 400 simulated sets in which the positive control
passes the bench (every test decided, none a regression), in which it is called a regression
(a false alarm; the judge holds it under α/2 of a member, 0.83 %), and in which a candidate
slower by exactly δ on one test passes that test (the judge holds it under α/2 too, at the
first test's Holm level, the strictest).

    .venv/bin/python examples/c-kernels/two_speed_host.py
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qualify.bench.judge import INCONCLUSIVE, Series, evaluate, unit_center

ALPHA, MEMBERS, MARGIN, RUNS = 0.05, 3, 0.10, 400
LOOKS = (12, 26, 40)
FAST_SHARE = 0.5
#: How much longer each of the ten tests takes in the slow state.
SLOWDOWN = (1.05, 1.05, 2.0, 2.0, 1.3, 1.3, 1.1, 1.1, 1.1, 1.1)
SAMPLE_NOISE = 0.01
ROLES = ("pinned", "clang19", "again", "slow")


@dataclass(frozen=True)
class Design:
    name: str
    together: bool
    samples: int


IN_TURN = Design("in turn", together=False, samples=5)
TOGETHER = Design("together", together=True, samples=20)


class Host:
    """A two-state host: `slow(t)` for times t in seconds from 0."""

    def __init__(self, rng: np.random.Generator, rate: float, horizon_s: float) -> None:
        # A two-state chain with stationary P(fast) = p and correlation decay exp(-rate·t):
        # leaving fast at rate·(1 − p), leaving slow at rate·p.
        self.switches: list[float] = []
        t, fast = 0.0, bool(rng.random() < FAST_SHARE)
        self.start_fast = fast
        while t < horizon_s:
            t += rng.exponential(1 / (rate * ((1 - FAST_SHARE) if fast else FAST_SHARE)))
            self.switches.append(t)
            fast = not fast

    def slow(self, t: np.ndarray) -> np.ndarray:
        flips = np.searchsorted(np.array(self.switches), t)
        return (flips % 2 == 0) != self.start_fast


def williams(pair: int) -> list[int]:
    """The roles' order in a block: the rows of a Williams design for four, in turn."""
    rows = ([0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1])
    return rows[pair % 4]


def sample_times(design: Design, rng: np.random.Generator, pairs: int) -> dict[str, list[np.ndarray]]:
    """Per role, the times of its samples in each block (warm-up block first, thrown away)."""
    times: dict[str, list[np.ndarray]] = {role: [] for role in ROLES}
    t = 0.0
    for pair in range(pairs + 1):
        if design.together:
            span = 1.3
            at = t + 0.05 + (np.arange(design.samples) + 0.5) * (span - 0.1) / design.samples
            for role in ROLES:
                times[role].append(at + rng.normal(0, 0.01, design.samples))
            t += span + 0.02
            continue
        for index in williams(pair):
            role = ROLES[index]
            lasts = 0.47 if role == "slow" else 0.37
            at = t + 0.05 + (np.arange(design.samples) + 0.5) * (lasts - 0.06) / design.samples
            times[role].append(at)
            t += lasts + 0.02
    return {role: blocks[1:] for role, blocks in times.items()}


#: The hosts simulated: two states as above; the same with heavy-tailed noise (Student's t with
#: two degrees of freedom, scaled to the 1 %: a sample now and then several times off); and a
#: sawtooth, no states but a slowdown that grows over 3 s to the test's factor and drops back.
SHAPES = ("two states", "heavy tails", "sawtooth")
SAWTOOTH_S = 3.0


def sample_logs(
    shape: str, host: Host, at: np.ndarray, factor: float, rng: np.random.Generator
) -> np.ndarray:
    """The logs of a test's samples taken at times `at` on a host of `shape` (1 µs at full speed)."""
    if shape == "sawtooth":
        return math.log(factor) * ((at % SAWTOOTH_S) / SAWTOOTH_S) + rng.normal(0, SAMPLE_NOISE, len(at))
    slow = np.where(host.slow(at), math.log(factor), 0.0)
    if shape == "heavy tails":
        return slow + SAMPLE_NOISE * rng.standard_t(2, len(at))
    return slow + rng.normal(0, SAMPLE_NOISE, len(at))


def one_set(
    design: Design, rng: np.random.Generator, rate: float, slower_test: int | None, shape: str = SHAPES[0]
) -> list[Series]:
    """The positive control against pinned: ten tests' pairs over 40 blocks. `slower_test`:
    that test of the control runs at 1 − δ of pinned's speed, its time 1 / (1 − δ) times as
    long (a candidate slower by exactly δ)."""
    pairs = LOOKS[-1]
    times = sample_times(design, rng, pairs)
    horizon = max(float(block.max()) for blocks in times.values() for block in blocks) + 1
    host = Host(rng, rate, horizon)
    center = unit_center("metrics", design.together)
    series = []
    for test, factor in enumerate(SLOWDOWN):
        values: dict[str, list[float]] = {}
        for role in ("pinned", "again"):
            extra = -math.log1p(-MARGIN) if role == "again" and test == slower_test else 0.0
            values[role] = []
            for at in times[role]:
                logs = sample_logs(shape, host, at, factor, rng)
                values[role].append(center([float(v) for v in np.exp(logs)]) + extra)
        pairs_of_test = tuple(zip(values["pinned"], values["again"], strict=True))
        series.append(Series(f"test{test}", "us", False, pairs_of_test))
    return series


def shares(
    design: Design, rate: float, runs: int = RUNS, seed: int = 11, shape: str = SHAPES[0]
) -> dict[str, float]:
    """Share of sets: the A/A passes; it is called a regression; a test δ slower passes."""
    rng = np.random.default_rng(seed)
    counts = {"A/A passes": 0, "A/A false alarm": 0, "δ slower passes": 0}
    for _ in range(runs):
        same = evaluate(one_set(design, rng, rate, None, shape), LOOKS, ALPHA / MEMBERS, MARGIN)
        counts["A/A passes"] += all(o.finding != INCONCLUSIVE and not o.regression for o in same)
        counts["A/A false alarm"] += any(o.regression for o in same)
        slower = evaluate(one_set(design, rng, rate, 0, shape), LOOKS, ALPHA / MEMBERS, MARGIN)
        counts["δ slower passes"] += slower[0].finding != INCONCLUSIVE and not slower[0].regression
    return {k: v / runs for k, v in counts.items()}


if __name__ == "__main__":
    print(f"alpha {ALPHA}/{MEMBERS}, margin {MARGIN:.0%}, looks {LOOKS}, {RUNS} sets a cell, seed 11")
    print("host         design      rate   A/A passes   A/A false alarm   δ slower passes")
    for shape in SHAPES:
        for design in (IN_TURN, TOGETHER):
            for rate in (0.5, 2.0, 5.0) if shape != "sawtooth" else (1.0,):  # unused there
                got = shares(design, rate, shape=shape)
                shown = f"{rate:4.1f}/s" if shape != "sawtooth" else f"{SAWTOOTH_S:3.0f} s "
                print(
                    f"{shape:12} {design.name:10} {shown} {got['A/A passes']:12.1%} "
                    f"{got['A/A false alarm']:17.1%} {got['δ slower passes']:17.1%}"
                )
