"""How long each tier of the test suite takes, measured in one run, beside the figures it is held to.

    python benchmarks/suite_time.py [--check-only] [--log PATH] [-- PYTEST_ARGS ...]

Runs pytest as `make test` does: `make check`'s tier (no nix, no example built, no model) on
two workers; the heavy tests on two workers, each module's tests on one worker; then the
heavy tests that measure time (marked alone) in one process; last those that measure time while
their processes mostly wait (marked quiet), four at a time. Each tier's time is the wall clock
from its first test's start to its last test's report (tests/tiers.py writes it with
--tier-times): the example's build counts in the rest, in the first test that uses it. Printed
beside the figures on a 2-core machine: the check tier should take under 5 minutes, the whole
suite under 30 (it took 52.5 with the rest in one process); CI, with its set-up and the
example's builds before it, must end within 60. Beside them, each tier's minutes as measured
before the c-kernels example's bench ran its units together and the quiet phase collected its
folder only (BEFORE_MIN), the baseline of the next change. --check-only runs `make check`'s
selection alone, in minutes.

On a machine shared with other work the minutes follow its load: how many of the machine's cores
were busy on average (/proc/stat: every process, the suite's and any other's) and the load
average before and after are printed with them, to compare runs made at different times.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from nixflakes import NIX_CONFIG  # noqa: E402  (the tests' folder is no package)
from tierclock import TierClock  # noqa: E402
from tiers import phases  # noqa: E402

#: Minutes on a 2-core machine: the check tier's target, the whole suite's, and the whole suite
#: as measured with the rest in one process.
CHECK_TARGET_MIN = 5.0
FULL_TARGET_MIN = 30.0
ONE_PROCESS_MIN = 52.5
#: Each tier's minutes on this 2-core machine, idle, warm store, before the c-kernels bench ran
#: its units together (its run set's test took 49 s alone, 73 s in CI) and before the quiet
#: phase collected tests/soak only (each of its four workers collected the whole suite).
BEFORE_MIN = {"check": 3.9, "rest": 10.8, "alone": 17.2, "quiet": 1.3, "whole": 33.3}
#: How pytest runs each tier, as the Makefile's test target does, and what each is called.
TIERS = phases()
LABELS = TierClock.LABELS


def busy_cores() -> tuple[int, int]:
    """The machine's CPU time so far, all of it and the idle part, in clock ticks (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]), fields[3] + fields[4]  # user..steal; idle and iowait


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check-only", action="store_true", help="run make check's tier alone")
    parser.add_argument("--log", type=Path, help="pytest's output goes here (default: the terminal)")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest, after --")
    args = parser.parse_args()
    phases = [TIERS["check"]] if args.check_only else list(TIERS.values())
    tiers: dict[str, dict[str, float]] = {}
    codes = []
    load_before = os.getloadavg()[0]
    ticks_before = busy_cores()
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as scratch,
        args.log.open("w") if args.log else contextlib.nullcontext() as out,
    ):
        for n, phase in enumerate(phases):
            times = Path(scratch) / f"tiers-{n}.json"
            argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--tier-times={times}"]
            done = subprocess.run(
                [*argv, *phase, *args.pytest_args],
                cwd=REPO,
                # As the Makefile exports it for `make test`: nix with flakes, building locally.
                env={**os.environ, "NIX_CONFIG": os.environ.get("NIX_CONFIG", NIX_CONFIG)},
                stdout=out,
                stderr=subprocess.STDOUT if out else None,
                # Started in the background (`… &`), pytest inherits SIGINT ignored: the suite
                # gives it a handler again itself (tests/conftest.py), as under `make test &`.
                check=False,
            )
            codes.append(done.returncode)
            if not times.is_file():
                sys.exit(f"pytest exited {done.returncode} before its summary: no tier times")
            for name, figures in json.loads(times.read_text()).items():
                if figures["tests"]:
                    tiers[name] = figures
    wall_s = time.monotonic() - started
    ticks_after = busy_cores()
    load_after = os.getloadavg()[0]
    returncode = max(codes) if any(c not in (0, 5) for c in codes) else 0

    total, idle = (after - before for after, before in zip(ticks_after, ticks_before, strict=True))
    cores = os.cpu_count() or 1
    busy = (total - idle) / total * cores if total else 0.0
    print(f"\npytest exited {', '.join(map(str, codes))}; {wall_s / 60:.1f} min wall, collection included")
    print(
        f"{busy:.2f} of the machine's {cores} cores busy on average (every process, /proc/stat); "
        f"load average {load_before:.1f} before, {load_after:.1f} after"
    )
    print(f"{'tier':<46} {'tests':>6} {'measured':>10} {'before':>10}   figure (2 cores)")
    shown = ["check"] if args.check_only else list(TIERS)
    for name in shown:
        figures = tiers.get(name, {"tests": 0, "seconds": 0.0})
        target = f"   under {CHECK_TARGET_MIN:g} min" if name == "check" else ""
        print(
            f"{LABELS[name]:<46} {figures['tests']:>6} {figures['seconds'] / 60:>6.1f} min"
            f" {BEFORE_MIN[name]:>6.1f} min{target}"
        )
    if not args.check_only:
        count = sum(int(tiers[name]["tests"]) for name in shown if name in tiers)
        minutes = sum(tiers[name]["seconds"] for name in shown if name in tiers) / 60
        print(
            f"{'whole suite (make test)':<46} {count:>6} {minutes:>6.1f} min {BEFORE_MIN['whole']:>6.1f} min"
            f"   under {FULL_TARGET_MIN:g} min ({ONE_PROCESS_MIN:g} with the rest in one process)"
        )
    sys.exit(returncode)


if __name__ == "__main__":
    main()
