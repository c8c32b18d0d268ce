"""What the bench stage's adaptive schedule buys, on seeded simulations, and what the harness
costs around a real llama-bench.

Simulation (no engine): units in ABBA order with lognormal noise, a random-walk drift and a
penalty on the second unit of each pair. It prints
- the false-alarm rate on A/A data (any FASTER or SLOWER claimed), against alpha;
- the power against a regression of twice the margin (6 % with δ = 3 %) at 1 % CV;
- the units the adaptive schedule ran (warm-up included) against a fixed design of 9
  repetitions per role judged by a two-sided Mann–Whitney U test at the same alpha, and that
  fixed design's power and false-alarm rate.

Overhead (`--bin DIR`, e.g. an arm's `{bin}`, and `--model FILE`): the same llama-bench
command run N times by a plain loop and by `qualify run` (warm-up, ABBA, environment snapshots,
Parquet), in interleaved rounds. Two ratios to the plain loop: the bench schedule's own wall
time (the stage's `duration_s`: every unit and everything qualify does around them), and the
whole `qualify run` process (its start, the run directory, the report). The figures are this
machine's, printed, never judged.

    python benchmarks/bench_schedule.py [--runs 1000] [--bin /nix/store/...-llama-cpp/bin --model m.gguf]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "bench"))

from benchsim import simulate  # the tests' simulator, found through sys.path

from qualify.bench.judge import FASTER, SLOWER, evaluate
from qualify.stats import abtests

ALPHA, MARGIN, MAX_PAIRS = 0.05, 0.03, 16


def simulations(runs: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    planned = abtests.planned_looks(abtests.min_pairs(abtests.first_holm_level(ALPHA, 1, 2)), MAX_PAIRS, 2)
    print(f"planned looks at {planned} pairs, alpha {ALPHA} split evenly, δ = {MARGIN:.0%}")
    for name, effect in (("A/A", 0.0), ("6 % regression", -0.06)):
        claims = regressions = fixed_rejects = 0
        units: list[int] = []
        for _ in range(runs):
            series = simulate(rng, MAX_PAIRS, effect=effect, cv=0.01, drift=0.003, position=0.01)
            [outcome] = evaluate([series], planned, ALPHA, MARGIN)
            claims += outcome.finding in (FASTER, SLOWER)
            regressions += outcome.finding == SLOWER and outcome.regression
            units.append(2 + 2 * outcome.pairs)
            # The fixed design: 9 units per role (the first 9 pairs), unpaired U test.
            pinned = [a for a, _ in series.pairs[:9] if a is not None]
            candidate = [b for _, b in series.pairs[:9] if b is not None]
            fixed_rejects += abtests.mann_whitney(pinned, candidate, ALPHA).p_value <= ALPHA
        print(
            f"{name:>15}: adaptive claims a change in {claims / runs:.3f}"
            f" (regression {regressions / runs:.3f}),"
            f" units median {int(np.median(units))} (max {max(units)});"
            f" fixed 9+9 U test rejects in {fixed_rejects / runs:.3f} with 18 units"
        )


def overhead(bin_dir: Path, model: Path, pairs: int, rounds: int) -> None:
    argv = [str(bin_dir / "llama-bench"), "-m", str(model), "-t", "2", "-p", "32", "-n", "8", "-r", "3"]
    argv += ["-o", "jsonl"]
    units = 2 + 2 * pairs

    def plain() -> None:
        for _ in range(units):
            subprocess.run(argv, capture_output=True, check=True)

    stage_s: list[float] = []

    def harness() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "stages").mkdir()
            (root / "qualify.toml").write_text(
                'plan = "stages"\n[arms.pinned]\ninstallable = ".#a"\n[arms.cand]\ninstallable = ".#b"\n'
            )
            # alpha 0.5 with min_pairs = max_pairs: exactly `pairs` pairs, whatever they show.
            (root / "stages" / "60-bench.toml").write_text(
                f'[[check]]\nkind = "bench"\nname = "b"\nrun = "{" ".join(argv)}"\nlooks = 1\n'
                f"max_pairs = {pairs}\nmin_pairs = {pairs}\nalpha = 0.5\n"
            )
            done = subprocess.run(
                [sys.executable, "-m", "qualify", "run", "--candidate", "cand", "-C", str(root)],
                capture_output=True,
                text=True,
                check=False,
            )
            if f"{pairs} pairs" not in done.stdout:
                raise SystemExit(f"the bench stage did not run {pairs} pairs:\n{done.stdout[-2000:]}")
            [stage] = root.glob("runs/*/60-bench/stage.json")
            stage_s.append(float(json.loads(stage.read_text())["duration_s"]))

    # Interleaved ABBA rounds, so load changing on the machine does not favour one side.
    times: dict[str, float] = {"plain": 0.0, "qualify": 0.0}
    for i in range(rounds):
        for name in ("plain", "qualify") if i % 2 == 0 else ("qualify", "plain"):
            start = time.monotonic()
            (plain if name == "plain" else harness)()
            times[name] += time.monotonic() - start
    print(
        f"{units} llama-bench units x {rounds} rounds: plain loop {times['plain']:.1f} s;"
        f" the bench schedule {sum(stage_s):.1f} s, ratio {sum(stage_s) / times['plain']:.3f};"
        f" the whole qualify run {times['qualify']:.1f} s, ratio {times['qualify'] / times['plain']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--bin", type=Path, help="a directory holding llama-bench")
    parser.add_argument("--model", type=Path, help="the GGUF model llama-bench loads")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    simulations(args.runs, args.seed)
    if args.bin and args.model:
        overhead(args.bin.resolve(), args.model.resolve(), args.pairs, args.rounds)


if __name__ == "__main__":
    main()
