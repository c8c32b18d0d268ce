"""Whether the bench can make the llama-bench process its unit and still decide pp at ±3 % in a
lease: a seeded simulation through the bench's own judge on the recorded processes.

The decide sets of 2026-12-02 and -03 ran 144 full-micro-batch llama-bench processes each. Each
ran pp2048 at one of two speeds about 25 % apart and kept it through its 3 s, while the
processes before and after it landed independently of it (`--states` prints how often two
neighbouring processes share a speed against how often independent ones would). A state that
is the process's own and changes from one process to the next cannot be cancelled by pairing
processes close in time: the process is the unit, and its speed is a draw from the mixture.

So each simulated pair draws two processes' pp2048 medians (the first repetition left out) from
the recorded pinned processes of one set, independently (an A/A: no effect), or multiplies the
candidate's by 0.94 (a 6 % slowdown, which the bench must call SLOWER beyond the margin) or by
0.97 (a slowdown of exactly the margin, which the default gate, "not slower", must pass at most
at its level). Three bench members share alpha = 0.05, with two looks at half and all of the
pairs. The minutes are those of the shortest process that measures pp: the recorded processes'
time outside their timed repetitions (start, model load, warm-up) plus two pp2048 repetitions
(the first is left out), four roles a pair.

    .venv/bin/python examples/llama-cpp-cuda/process_units.py SET_DIR...      # the sizing
    .venv/bin/python examples/llama-cpp-cuda/process_units.py --states SET_DIR...
    .venv/bin/python examples/llama-cpp-cuda/process_units.py --long PROBES

`--long PROBES` (`recorded/host-20261206/state-probes.tar.xz`) reads the long processes of the
2026-12-06 lease (an H100): pinned's llama-bench with 80 or 200 repetitions of pp2048 and
nothing else (`long-*`, `longer-*`), and the variants with one thread, one thread on one CPU,
and eight threads on CPUs 0-7 not spinning (`v-*`, three processes each, 60 repetitions): per
process, the repetitions in order (F above 53 000 t/s, s below), how often the speed switched,
and the share of fast repetitions.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd

from qualify.bench.judge import INCONCLUSIVE, SLOWER, Series, evaluate
from qualify.bench.params import NOT_SLOWER

ALPHA, MEMBERS, MARGIN, RUNS, SEED = 0.05, 3, 0.03, 200, 20261206
PAIRS = (48, 96, 192)  # 192 pairs of four roles: 16 minutes, more than a lease leaves the bench
ROLES = ("pinned", "positive-pinned")  # both pinned's build: their processes are one population
TEST = "pp2048"


def bench_dir(run_set: Path) -> Path:
    # The set's own bench folder, not a member's copy of it (`<role>/60-bench/...`).
    found = sorted(run_set.glob("60-bench/llama-bench/units.jsonl"))
    if not found:
        raise SystemExit(f"{run_set}: no bench units (60-bench/llama-bench/units.jsonl) beneath it")
    return found[0].parent


def process_logs(bench: Path) -> np.ndarray:
    """log of every pinned process's pp2048 median over its kept repetitions."""
    logs = []
    for role in ROLES:
        frame = pd.read_parquet(bench / role / "samples.parquet")
        kept = frame[(frame["test"] == TEST) & (frame["rep"] >= 1)]
        logs += [math.log(float(rows["value"].median())) for _, rows in kept.groupby("unit")]
    return np.array(logs)


def overhead_s(bench: Path) -> float:
    """Median seconds of a process outside its timed repetitions, plus two pp repetitions."""
    spans, pp_rep = [], []
    units = {u["index"]: u for u in map(json.loads, (bench / "units.jsonl").read_text().splitlines())}
    for role in ROLES:
        frame = pd.read_parquet(bench / role / "samples.parquet")
        for unit, rows in frame.groupby("unit"):
            spans.append(units[int(unit)]["duration_s"] - rows["ns"].sum() / 1e9)
            pp_rep.append(float(rows[rows["test"] == TEST]["ns"].median()) / 1e9)
    return float(np.median(spans)) + 2 * float(np.median(pp_rep))


def passed(finding: str, regression: bool) -> bool:
    return finding != INCONCLUSIVE and not regression


def shares(
    logs: np.ndarray, pairs: int, rng: np.random.Generator, runs: int = RUNS
) -> tuple[float, float, float]:
    """(A/A passes, 6 % slower called SLOWER beyond the margin, 3 % slower passes)."""
    looks = (pairs // 2, pairs)
    counts = [0, 0, 0]
    for _ in range(runs):
        draws = rng.choice(logs, size=(pairs, 2))
        for k, effect in enumerate((0.0, -0.06, -MARGIN)):
            pairs_of = tuple((float(a), float(b) + math.log1p(effect)) for a, b in draws)
            series = Series(TEST, "t/s", True, pairs_of)
            outcome = evaluate([series], looks, ALPHA / MEMBERS, MARGIN, NOT_SLOWER)[0]
            if k == 1:
                counts[k] += outcome.finding == SLOWER and outcome.regression
            else:
                counts[k] += passed(outcome.finding, outcome.regression)
    return counts[0] / runs, counts[1] / runs, counts[2] / runs


def sizing(run_sets: list[Path]) -> None:
    print(f"alpha {ALPHA}/{MEMBERS}, margin ±{MARGIN:.0%}, gate {NOT_SLOWER}, {RUNS} seeded runs a cell")
    print(
        "set               processes  SD of logs  pairs  minutes"
        "   A/A passes  6 % slower: SLOWER  3 % slower passes"
    )
    for run_set in run_sets:
        bench = bench_dir(run_set)
        logs, unit_s = process_logs(bench), overhead_s(bench)
        rng = np.random.default_rng(SEED)
        for pairs in PAIRS:
            same, caught, margin = shares(logs, pairs, rng)
            minutes = pairs * 4 * unit_s / 60
            print(
                f"{run_set.name[:16]:16} {len(logs):10} {logs.std(ddof=1):10.1%} {pairs:6} {minutes:8.0f}"
                f"   {same:10.0%}   {caught:17.0%}   {margin:16.1%}"
            )


def speed_states(bench: Path) -> tuple[int, float, float, int]:
    """(processes, share in the fast state, share of processes in the state of the one before
    them, processes whose kept repetitions fall in both states), over every full-micro-batch
    process of the set in the order they ran."""
    rows = []
    for role in (*ROLES, "cuda135"):
        frame = pd.read_parquet(bench / role / "samples.parquet")
        kept = frame[(frame["test"] == TEST) & (frame["rep"] >= 1)]
        for unit, reps in kept.groupby("unit"):
            rows.append((int(unit), reps["value"].to_numpy()))
    rows.sort()
    medians = np.array([np.median(v) for _, v in rows])
    # The two speeds: the split of the sorted logs that leaves the least spread within each side
    # (two-means in one dimension, tried at every split).
    ordered = np.sort(np.log(medians))
    n = len(ordered)
    spread = [ordered[:k].var() * k + ordered[k:].var() * (n - k) for k in range(2, n - 1)]
    cut = math.exp(ordered[1 + int(np.argmin(spread))])
    fast = medians > cut
    switched = sum(bool((v > cut).any() and (v <= cut).any()) for _, v in rows)
    return len(rows), float(fast.mean()), float(np.mean(fast[1:] == fast[:-1])), switched


def states(run_sets: list[Path]) -> None:
    """How often a process shares its neighbour's speed, against independent draws."""
    print("set               processes  fast share  same as the next process  independent  switched within")
    for run_set in run_sets:
        processes, p, same, switched = speed_states(bench_dir(run_set))
        print(
            f"{run_set.name[:16]:16} {processes:10} {p:10.0%} {same:25.0%}"
            f" {p * p + (1 - p) ** 2:12.0%} {switched:16}"
        )


FAST = 53_000.0  # t/s of pp2048 between the two speeds (about 41 000 and 57 000 on the H100)


def long_processes(archive: Path) -> dict[str, str]:
    """Process name -> its pp2048 repetitions in order, F fast and s slow."""
    states = {}
    with tarfile.open(archive) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not member.name.endswith(".jsonl"):
                continue
            handle = tar.extractfile(member)
            assert handle is not None
            rows = [json.loads(line) for line in handle.read().decode().splitlines() if line.startswith("{")]
            speeds = rows[0]["samples_ts"]
            states[member.name.removesuffix(".jsonl")] = "".join("F" if t > FAST else "s" for t in speeds)
    return states


def long(archive: Path) -> None:
    print("process             reps  switches  fast share  repetitions in order")
    for name, states in long_processes(archive).items():
        switches = sum(a != b for a, b in itertools.pairwise(states))
        fast = states.count("F") / len(states)
        print(f"{name:18} {len(states):5} {switches:9} {fast:11.2f}  {states[:80]}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--states"] and args[1:]:
        states([Path(a) for a in args[1:]])
    elif args[:1] == ["--long"] and len(args) == 2:
        long(Path(args[1]))
    elif args and not args[0].startswith("-"):
        sizing([Path(a) for a in args])
    else:
        raise SystemExit(__doc__)
