"""How long each tier of the test suite takes, measured in one run, beside the figures it is held to.

    python benchmarks/suite_time.py [--check-only] [--log PATH] [-- PYTEST_ARGS ...]

Runs pytest as `make test` does: `make check`'s tier (no nix, no example built, no model) on
two workers; the heavy tests on two workers, each module's tests on one worker; then the
heavy tests that measure time (marked alone) in one process. Each tier's time is the wall clock
from its first test's start to its last test's report (tests/tiers.py writes it with
--tier-times): the example's build counts in the rest, in the first test that uses it. Printed
beside the figures on a 2-core machine: the check tier should take under 5 minutes, the whole
suite under 30 (it took 52.5 with the rest in one process); CI, with its set-up and the
example's builds before it, must end within 60. --check-only runs `make check`'s selection
alone, in minutes.

On a machine shared with other work the minutes follow its load: the run's CPU time (pytest's
and every process it waited for) and the load average before and after are printed with them,
to compare runs made at different times.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from nixflakes import NIX_CONFIG  # noqa: E402  (the tests' folder is no package)
from tiers import alone_markexpr, check_markexpr, rest_markexpr  # noqa: E402

#: Minutes on a 2-core machine: the check tier's target, the whole suite's, and the whole suite
#: as measured with the rest in one process.
CHECK_TARGET_MIN = 5.0
FULL_TARGET_MIN = 30.0
ONE_PROCESS_MIN = 52.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check-only", action="store_true", help="run make check's tier alone")
    parser.add_argument("--log", type=Path, help="pytest's output goes here (default: the terminal)")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest, after --")
    args = parser.parse_args()
    phases = [["-n", "2", "-m", check_markexpr()]]
    if not args.check_only:
        phases.append(["-n", "2", "--dist", "loadfile", "-m", rest_markexpr()])
        phases.append(["-m", alone_markexpr()])
    tiers: dict[str, dict[str, float]] = {}
    codes = []
    load_before = os.getloadavg()[0]
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
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = used.ru_utime + used.ru_stime
    load_after = os.getloadavg()[0]
    returncode = max(codes) if any(c not in (0, 5) for c in codes) else 0

    empty = {"tests": 0, "seconds": 0.0}
    check, rest, alone = (tiers.get(name, empty) for name in ("check", "rest", "alone"))
    print(f"\npytest exited {', '.join(map(str, codes))}; {wall_s / 60:.1f} min wall, collection included")
    print(
        f"{cpu_s / 60:.1f} min of CPU (pytest and the processes it waited for), "
        f"{cpu_s / wall_s:.2f} cores on average; load average {load_before:.1f} before, "
        f"{load_after:.1f} after, on {os.cpu_count()} cores"
    )
    print(f"{'tier':<34} {'tests':>6} {'measured':>10}   figure (2 cores)")
    print(
        f"{'check (make check)':<34} {check['tests']:>6} {check['seconds'] / 60:>6.1f} min"
        f"   under {CHECK_TARGET_MIN:g} min"
    )
    if not args.check_only:
        print(f"{'the rest, two workers':<34} {rest['tests']:>6} {rest['seconds'] / 60:>6.1f} min")
        print(f"{'the rest measuring time, alone':<34} {alone['tests']:>6} {alone['seconds'] / 60:>6.1f} min")
        count = check["tests"] + rest["tests"] + alone["tests"]
        minutes = (check["seconds"] + rest["seconds"] + alone["seconds"]) / 60
        print(
            f"{'whole suite (make test)':<34} {count:>6} {minutes:>6.1f} min"
            f"   under {FULL_TARGET_MIN:g} min ({ONE_PROCESS_MIN:g} with the rest in one process)"
        )
    sys.exit(returncode)


if __name__ == "__main__":
    main()
