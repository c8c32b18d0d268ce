"""Which bench design decides on a host that runs at two speeds: llama-bench processes seconds
apart, or requests to resident servers a fraction of a second apart? (README.md, "The noise
study on the H200")

A seeded simulation through the bench's own judge (`qualify.bench.judge.evaluate`), of a host
modelled on the H200 lease of 2026-12-03: its speed is one of two states, fast 30 % of the time
(the CPU probe: 30 % of loops near 698/s, 70 % near 389/s), switching as a Markov chain whose
autocorrelation decays at RATE per second (the probe's means: 0.83 after 0.2 s, 0.60 after
1 s, 0.49 after 5 s, so between about 0.5/s and 1/s; both are run). The engine's speed follows
the state: pp2048 ×1.31 in the fast state (the recorded decide-strict units' two modes, 58 600
against 44 700 t/s), tg ×1.02 (1 001 against 980). On top, independent noise per measurement:
a llama-bench repetition 1.5 % (pp) and 0.3 % (tg), the recorded units' spread within a
process; a server request 5.6 % and 5.2 %, the A/A ratio of one round (7.9 % and 7.3 %)
divided by √2.

The designs, timed as they run, four roles a block (pinned, the candidate, the A/A, ub256):
- llama-bench: a unit is a process of 3.3 s whose pp repetitions (six of 35 ms, the first left
  out) fall 1 s in, and whose tg repetitions (six of 0.26 s) follow; the roles in turn; looks
  at 24 and 48 pairs (decide-strict).
- servers: a block starts the servers (3 s) and warms them (two requests each), then 20
  rounds, each a 2 048-token prompt (75 ms) to every server, then 128 tokens (0.26 s) from
  every one, the order rotating; looks at 10 and 20 blocks (decide-servers).

A unit's value is made from its repetitions as the judge makes it (`unit_center`): the median
of a llama-bench process's repetitions, the mean of the logs of a server block's rounds; the
blocks are also valued by their median, to show why they are not.

It prints, per design and rate, the share of 200 simulated sets in which the A/A's pp and tg end
NO CHANGE (asked as the equivalence question, `gate = "no-change"`, as when the design was
chosen: under the default, "not slower", an A/A passes at least as often), and in which a
candidate 6 % slower on pp (the size the ub256 control must be caught
at, and twice the margin) is called SLOWER beyond the margin. What it leaves out: any state of
one process (the study's three server lifetimes showed none), and a state that differs between
the cores the roles' threads run on (partly so: the two servers' speeds correlated 0.6-0.7
across rounds, which the per-request noise stands for).

    .venv/bin/python examples/llama-cpp-cuda/host_states.py
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from qualify.bench.judge import NO_CHANGE, SLOWER, Series, evaluate, unit_center
from qualify.bench.params import NO_CHANGE_GATE

ALPHA, MEMBERS, MARGIN, RUNS = 0.05, 3, 0.03, 200
FAST_SHARE = 0.30
SPEEDUP = {"pp": 1.31, "tg": 1.02}
ROLES = ("pinned", "candidate", "aa", "ub256")


@dataclass(frozen=True)
class Design:
    name: str
    looks: tuple[int, ...]
    noise: dict[str, float]  # independent noise per measurement, SD of the log
    #: How the judge makes a unit's repetitions its value (`qualify.bench.judge.unit_center`).
    center: Callable[[Sequence[float]], float]


LLAMA_BENCH = Design("llama-bench units", (24, 48), {"pp": 0.015, "tg": 0.003}, unit_center("llama-bench"))
SERVERS = Design("server blocks", (10, 20), {"pp": 0.056, "tg": 0.052}, unit_center("llama-server"))
#: The same blocks valued by their rounds' median, as llama-bench units are: for comparison.
SERVERS_MEDIAN = Design("  (by median)", (10, 20), SERVERS.noise, unit_center("llama-bench"))


class Host:
    """A two-state host: `fast(t)` for times t in seconds from 0."""

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

    def fast(self, t: np.ndarray) -> np.ndarray:
        flips = np.searchsorted(np.array(self.switches), t)
        return (flips % 2 == 0) == self.start_fast


def measure(host: Host, test: str, times: np.ndarray, noise: float, rng: np.random.Generator) -> list[float]:
    """Throughput of measurements taken at `times` (1000 t/s in the slow state)."""
    speed = np.where(host.fast(times), math.log(SPEEDUP[test]), 0.0)
    return [float(v) for v in np.exp(math.log(1000) + speed + rng.normal(0, noise, len(times)))]


def llama_bench_set(rng: np.random.Generator, rate: float, effect: float) -> list[Series]:
    blocks = LLAMA_BENCH.looks[-1]
    host = Host(rng, rate, blocks * len(ROLES) * 3.3 + 10)
    values: dict[str, dict[str, list[float]]] = {t: {r: [] for r in ("pinned", "candidate")} for t in SPEEDUP}
    t = 0.0
    for block in range(blocks):
        order = ROLES if block % 2 == 0 else ROLES[::-1]
        for role in order:
            pp_times = t + 1.0 + 0.035 * np.arange(1, 6)
            tg_times = t + 1.3 + 0.26 * np.arange(1, 6)
            for test, times in (("pp", pp_times), ("tg", tg_times)):
                reps = measure(host, test, times, LLAMA_BENCH.noise[test], rng)
                if role in values[test]:
                    shift = math.log1p(effect) if role == "candidate" and test == "pp" else 0.0
                    values[test][role].append(LLAMA_BENCH.center(reps) + shift)
            t += 3.3
    return [
        Series(test, "t/s", True, tuple(zip(v["pinned"], v["candidate"], strict=True)))
        for test, v in values.items()
    ]


def servers_set(
    rng: np.random.Generator, rate: float, effect: float, design: Design, rounds: int = 20
) -> list[Series]:
    blocks = SERVERS.looks[-1]
    per_block = 3.0 + 2 * len(ROLES) * 0.335 + rounds * len(ROLES) * 0.335
    host = Host(rng, rate, blocks * per_block + 10)
    values: dict[str, dict[str, list[float]]] = {t: {r: [] for r in ("pinned", "candidate")} for t in SPEEDUP}
    for block in range(blocks):
        t = block * per_block + 3.0 + 2 * len(ROLES) * 0.335
        times: dict[str, dict[str, list[float]]] = {test: {r: [] for r in ROLES} for test in SPEEDUP}
        for index in range(rounds):
            shift = index % len(ROLES)
            order = [*ROLES[shift:], *ROLES[:shift]]
            for test, lasts in (("pp", 0.075), ("tg", 0.26)):
                for role in order:
                    times[test][role].append(t)
                    t += lasts
        for test in SPEEDUP:
            for role in ("pinned", "candidate"):
                reps = measure(host, test, np.array(times[test][role]), design.noise[test], rng)
                offset = math.log1p(effect) if role == "candidate" and test == "pp" else 0.0
                values[test][role].append(design.center(reps) + offset)
    return [
        Series(test, "t/s", True, tuple(zip(v["pinned"], v["candidate"], strict=True)))
        for test, v in values.items()
    ]


def shares(design: Design, rate: float, runs: int = RUNS, seed: int = 7) -> dict[str, float]:
    """Share of sets: pp and tg NO CHANGE in an A/A; pp SLOWER beyond the margin at −6 %."""
    rng = np.random.default_rng(seed)

    def simulate(rng: np.random.Generator, rate: float, effect: float) -> list[Series]:
        if design is LLAMA_BENCH:
            return llama_bench_set(rng, rate, effect)
        return servers_set(rng, rate, effect, design)

    counts = {"pp NO CHANGE": 0, "tg NO CHANGE": 0, "pp −6 % SLOWER": 0}
    for _ in range(runs):
        same = evaluate(simulate(rng, rate, 0.0), design.looks, ALPHA / MEMBERS, MARGIN, NO_CHANGE_GATE)
        counts["pp NO CHANGE"] += same[0].finding == NO_CHANGE
        counts["tg NO CHANGE"] += same[1].finding == NO_CHANGE
        slower = evaluate(simulate(rng, rate, -0.06), design.looks, ALPHA / MEMBERS, MARGIN, NO_CHANGE_GATE)
        counts["pp −6 % SLOWER"] += slower[0].finding == SLOWER and slower[0].regression
    return {k: v / runs for k, v in counts.items()}


if __name__ == "__main__":
    print(f"alpha {ALPHA}/{MEMBERS}, margin ±{MARGIN:.0%}, {RUNS} simulated sets a cell, seed 7")
    print("design              looks     rate   A/A pp NO CHANGE   A/A tg NO CHANGE   pp −6 %: SLOWER")
    for design in (LLAMA_BENCH, SERVERS, SERVERS_MEDIAN):
        for rate in (0.5, 1.0):
            got = shares(design, rate)
            print(
                f"{design.name:18} {design.looks!s:9} {rate:4.1f}/s {got['pp NO CHANGE']:16.0%} "
                f"{got['tg NO CHANGE']:18.0%} {got['pp −6 % SLOWER']:16.0%}"
            )
