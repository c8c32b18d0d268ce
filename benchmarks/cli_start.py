"""How long the CLI takes to start, next to a bare interpreter, measured in one run.

    python benchmarks/cli_start.py [--repeat 7]

Prints the median wall time of `qualify --version`, `qualify --help` and `qualify plan` (on the
bundled example) next to `python -c pass`; the target is 0.25 s for each on a 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def median_s(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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
    for label, argv in cases.items():
        print(f"{label:<30} {median_s(argv, args.repeat):6.3f} s")


if __name__ == "__main__":
    main()
