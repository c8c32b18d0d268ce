"""How many ABBA pairs the bench needs to decide at ±3 %, by the noise of a pair; and where
the noise of the recorded H200 bench lies.

Seeded simulations through the bench's own judge (`qualify.bench.judge.evaluate`): two tests
(pp and tg), alpha = 0.05 shared by the run set's three bench members (the candidate, the A/A
control and the micro-batch control), the decide profile's looks. For each paired noise
(the SD of log(candidate / pinned) over pairs) it prints the share of runs in which an A/A
test ends NO CHANGE, and in which a 6 % slowdown ends SLOWER beyond the margin. The judge is
asked the equivalence question (`gate = "no-change"`), as when these designs were sized; under
the bench's default, "not slower", an A/A control passes at least as often.

    .venv/bin/python examples/llama-cpp-cuda/decide_pairs.py             # the sizing
    .venv/bin/python examples/llama-cpp-cuda/decide_pairs.py --recorded  # the recorded noise

`--recorded` reads the recorded run's bench samples: per role and test, how much the kept
repetitions of one process vary (within a unit) against how much the units' medians vary
(between processes), and the SD of the paired log ratios.

    .venv/bin/python examples/llama-cpp-cuda/decide_pairs.py --resample SET_DIR

`--resample` asks the same question of the noise a run set's bench really had, mixture of
process speeds and all, rather than of a normal law: each simulated pair draws its two units'
medians (each unit's first repetition left out) from the pinned units of SET_DIR's bench (its
`pinned` and `positive-pinned` roles, both pinned's build), independently, so the A/A has no
effect; the slowdown multiplies the candidate's draw by 0.94. What it leaves out: a drift that
both units of a pair share (pairs cancel it, so the real design can only do better).

    .venv/bin/python examples/llama-cpp-cuda/decide_pairs.py --rounds SET_DIR

`--rounds` reads a set whose bench ran server blocks (`format = "llama-server"`): per member
and test, the SD of one round's log ratio to pinned's round of the same block, what that SD
predicts for a block's mean of its rounds (SD / sqrt(rounds)), the SD the block means had, and
how closely pinned's and the A/A server's rounds of one block follow each other (the median
correlation of their logs). Where the prediction matches, the blocks' noise is the rounds' own,
and only more rounds in all (blocks × rounds) narrow it. The last two columns ask whether a
robust summary of a block would do better: the rounds' excess kurtosis about their block's mean
(0 for a normal law; heavy tails are well above it), and the SD of the blocks' median ratios.
"""

from __future__ import annotations

import math
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from qualify.bench.judge import NO_CHANGE, SLOWER, Series, evaluate
from qualify.bench.params import NO_CHANGE_GATE

ALPHA, MEMBERS, MARGIN, RUNS = 0.05, 3, 0.03, 200
LOOKS = (24, 48)
RECORDED = Path(__file__).parent / "recorded" / "20261201-162842-cuda135.tar.xz"


def series(rng: np.random.Generator, label: str, pairs: int, effect: float, pair_sd: float) -> Series:
    unit_sd = pair_sd / math.sqrt(2)
    values = []
    for _ in range(pairs):
        pinned = math.log(1000) + rng.normal(0, unit_sd)
        values.append((pinned, math.log(1000 * (1 + effect)) + rng.normal(0, unit_sd)))
    return Series(label, "t/s", True, tuple(values))


def share(effect: float, pair_sd: float, wanted: str, seed: int = 1) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(RUNS):
        tests = [series(rng, "pp", LOOKS[-1], effect, pair_sd), series(rng, "tg", LOOKS[-1], 0.0, 0.012)]
        outcome = evaluate(tests, LOOKS, ALPHA / MEMBERS, MARGIN, NO_CHANGE_GATE)[0]
        hits += outcome.finding == wanted and (wanted != SLOWER or outcome.regression)
    return hits / RUNS


def recorded(archive: Path = RECORDED, discard: int = 1) -> None:
    with tempfile.TemporaryDirectory() as where, tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
        bench = Path(where) / archive.name.removesuffix(".tar.xz") / "60-bench" / "llama-bench"
        unit_spread(bench, discard)


def unit_spread(folder: Path, discard: int = 1) -> None:
    medians = {}
    for role in ("pinned", "candidate"):
        frame = pd.read_parquet(folder / role / "samples.parquet")
        kept = frame[frame["rep"] >= discard]
        for test, rows in kept.groupby("test"):
            by_unit = rows.groupby("unit")["value"]
            within = (by_unit.std() / by_unit.mean()).median()
            unit_medians = rows.groupby("pair")["value"].median()
            between = unit_medians.std() / unit_medians.mean()
            medians[(role, test)] = unit_medians
            print(
                f"{role:9} {test:6} within a unit {within:6.2%}   between units {between:6.2%}   "
                f"unit medians {unit_medians.min():.0f}–{unit_medians.max():.0f}"
            )
    for test in sorted({t for _, t in medians}):
        logs = np.log(medians[("candidate", test)]) - np.log(medians[("pinned", test)])
        robust = 1.4826 * float(np.median(np.abs(logs - np.median(logs))))
        print(f"{test:6} pair noise: SD {logs.std(ddof=1):.2%}, robust SD {robust:.2%}, {len(logs)} pairs")


def unit_logs(
    bench: Path, roles: tuple[str, ...] = ("pinned", "positive-pinned"), discard: int = 1
) -> dict[str, np.ndarray]:
    """Per test, the log of every unit's median over its kept repetitions, pooled over `roles`."""
    out: dict[str, list[float]] = {}
    for role in roles:
        path = bench / role / "samples.parquet"
        if not path.exists():
            continue
        frame = pd.read_parquet(path)
        kept = frame[frame["rep"] >= discard]
        for (test, _unit), rows in kept.groupby(["test", "unit"]):
            out.setdefault(str(test), []).append(math.log(float(rows["value"].median())))
    return {test: np.array(values) for test, values in out.items()}


def resampled_share(logs: np.ndarray, effect: float, wanted: str, seed: int = 1) -> float:
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(RUNS):
        draws = rng.choice(logs, size=(LOOKS[-1], 2))
        pairs = tuple((float(a), float(b) + math.log1p(effect)) for a, b in draws)
        tests = [Series("t", "t/s", True, pairs), series(rng, "other", LOOKS[-1], 0.0, 0.012)]
        outcome = evaluate(tests, LOOKS, ALPHA / MEMBERS, MARGIN, NO_CHANGE_GATE)[0]
        hits += outcome.finding == wanted and (wanted != SLOWER or outcome.regression)
    return hits / RUNS


def resample(run_set: Path) -> None:
    bench = run_set / "60-bench" / "llama-bench"
    print(f"looks {LOOKS}, alpha {ALPHA}/{MEMBERS}, margin ±{MARGIN:.0%}, {RUNS} runs each, units of {bench}")
    print("test      units  unit SD   A/A NO CHANGE   6 % slower: SLOWER (regression)")
    for test, logs in sorted(unit_logs(bench).items()):
        same, slower = resampled_share(logs, 0.0, NO_CHANGE), resampled_share(logs, -0.06, SLOWER)
        print(f"{test:8} {len(logs):6} {logs.std(ddof=1):7.2%}   {same:13.0%}   {slower:13.0%}")


KEYS = ["test", "pair", "rep"]  # a block's rounds: its pair number and the round within it


def rounds(run_set: Path) -> None:
    bench = run_set / "60-bench" / "llama-bench"
    logs = {
        role: np.log(pd.read_parquet(bench / role / "samples.parquet").set_index(KEYS).value)
        for role in ("pinned", "positive-pinned", "cuda135", "negative-ub256")
        if (bench / role / "samples.parquet").exists()
    }
    base = logs.pop("pinned")
    print(
        "test     member            round SD  predicted block SD  block SD  rounds  pinned~A/A r"
        "  kurtosis  block SD (medians)"
    )
    for test in sorted(set(base.index.get_level_values(0))):
        for member, member_logs in logs.items():
            ratio = (member_logs.loc[test] - base.loc[test]).dropna()
            blocks = ratio.groupby(level=0)
            per_round = float(blocks.std().mean())
            n = int(blocks.size().median())
            correlation = ""
            if member == "positive-pinned":
                both = pd.concat([base.loc[test], member_logs.loc[test]], axis=1).dropna()
                r = [float(np.corrcoef(g.iloc[:, 0], g.iloc[:, 1])[0, 1]) for _, g in both.groupby(level=0)]
                correlation = f"{np.median(r):.2f}"
            # Heavy tails (excess kurtosis well above 0) would let a robust summary of a block's
            # rounds (their median) vary less than their mean does; without them it varies more.
            tails = float(stats.kurtosis(ratio - blocks.transform("mean")))
            print(
                f"{test:8} {member:16} {per_round:9.1%} {per_round / math.sqrt(n):19.1%}"
                f" {float(blocks.mean().std()):9.1%} {n:7}  {correlation:12}"
                f" {tails:9.2f} {float(blocks.median().std()):19.1%}"
            )


if __name__ == "__main__" and sys.argv[1:] == ["--recorded"]:
    recorded()
elif __name__ == "__main__" and sys.argv[1:2] == ["--rounds"] and len(sys.argv) == 3:
    rounds(Path(sys.argv[2]))
elif __name__ == "__main__" and sys.argv[1:2] == ["--resample"] and len(sys.argv) == 3:
    resample(Path(sys.argv[2]))
elif __name__ == "__main__":
    print(f"looks {LOOKS}, alpha {ALPHA}/{MEMBERS}, margin ±{MARGIN:.0%}, {RUNS} runs each")
    print("pair SD   A/A NO CHANGE   6 % slower: SLOWER (regression)")
    for sd in (0.012, 0.02, 0.03, 0.04, 0.05, 0.06, 0.086):
        print(f"{sd:7.1%}   {share(0.0, sd, NO_CHANGE):13.0%}   {share(-0.06, sd, SLOWER):13.0%}")
