"""How long the CLI takes to start, next to a bare interpreter, measured in one run.

    python benchmarks/cli_start.py [--repeat 7]

Prints the median and the fastest wall time of `qualify --version`, `qualify --help` and
`qualify plan` (on the bundled example) next to `python -c pass`, all measured in turn in one run
(a busy machine slows every line alike); the target is 0.25 s for each on a 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def wall_s(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    qualify = [sys.executable, "-m", "qualify"]
    cases = {
        "python -c pass (baseline)": [sys.executable, "-c", "pass"],
        "qualify --version": [*qualify, "--version"],
        "qualify --help": [*qualify, "--help"],
        "qualify plan (example)": [*qualify, "plan", "-C", str(REPO / "examples" / "llama-cpp")],
    }
    times: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(args.repeat):  # round robin: load that comes and goes hits every case
        for label, argv in cases.items():
            times[label].append(wall_s(argv))
    print(f"{'':<30} {'median':>8} {'fastest':>8}")
    for label, seen in times.items():
        print(f"{label:<30} {statistics.median(seen):6.3f} s {min(seen):6.3f} s")


if __name__ == "__main__":
    main()
