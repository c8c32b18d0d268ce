"""What containing a command costs: the same short command run N times through qualify's one
process runner, bare (outside a run) and inside a run's containment (a cgroup per command, the
run folder read-only through bubblewrap, the command in its own PID namespace as another user
with no privilege), in interleaved rounds.

It prints the mean wall time of one command in each way, and the difference: the price of a
cgroup made and removed, of the namespaces and of dropping the privileges per command. The
figures are this machine's, printed, never judged; which containment the host gave is printed
first.

    python benchmarks/containment.py [--commands 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from qualify.core import process
from qualify.core.containment import contained, writing
from qualify.core.environment import child_env


def batch(count: int, log: Path) -> float:
    """Mean seconds of one `true` through the runner."""
    start = time.perf_counter()
    for _ in range(count):
        done = process.run(["true"], log=log, env=child_env())
        assert done.ok, done.describe()
    return (time.perf_counter() - start) / count


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commands", type=int, default=200, help="commands per batch")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds of both ways")
    args = parser.parse_args()
    bare: list[float] = []
    held: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        check = run / "10-build" / "check"
        check.mkdir(parents=True)
        log = check / "logs" / "bench.log"
        with contained(run, "containment-bench") as jail:
            print(f"processes: {jail.processes}\nrecords:   {jail.records}")
            print(f"privileges: {jail.describe()['privileges']}")
        for _ in range(args.rounds):
            bare.append(batch(args.commands, log))
            with contained(run, "containment-bench"), writing(check):
                held.append(batch(args.commands, log))
    b, h = statistics.mean(bare), statistics.mean(held)
    print(
        f"one command, bare:      {b * 1000:7.2f} ms (rounds: {', '.join(f'{x * 1000:.2f}' for x in bare)})"
    )
    print(
        f"one command, contained: {h * 1000:7.2f} ms (rounds: {', '.join(f'{x * 1000:.2f}' for x in held)})"
    )
    print(f"containment costs {(h - b) * 1000:.2f} ms a command ({h / b:.1f}x a bare `true`)")


if __name__ == "__main__":
    sys.exit(main())
