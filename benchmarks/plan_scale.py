"""How `qualify plan` scales with the number of checks, measured in one run.

    python benchmarks/plan_scale.py [--checks 100 10000] [--repeat 3]

Writes a project per size: one stage file holding every check (`command` checks, each with a
limit, a timeout and a variable) and a profile that overrides every check. Then runs
`qualify plan` and `qualify plan --profile quick` as real processes on each, in turn (a busy
machine slows every line alike), and prints
the fastest wall time per size next to the smallest size's, with the time per check, and the
process's CPU time (user + system), which other load on the machine does not stretch. Loading a
plan reads each stage file once, so the time per check stays flat as the plan grows; the target
is 5 s for 10 000 checks on a 2-core machine.

Baseline, the loader that scanned the whole file for each check's line, on an idle machine
(Python 3.12, one core busy): 100 checks 0.31 s, 400 checks 2.7 s, 1000 checks 20.5 s
(65× for 10× the checks); with one pass per file: 100 checks 0.27 s, 10 000 checks 1.8 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 5.0  # for 10 000 checks


def write_project(root: Path, checks: int) -> Path:
    root.mkdir(parents=True)
    (root / "qualify.toml").write_text(
        'plan = "stages"\n[arms.pinned]\ninstallable = ".#default"\n[arms.cand]\ninstallable = ".#cand"\n'
    )
    (root / "stages").mkdir()
    lines = ['name = "many"']
    for n in range(checks):
        lines += [
            "[[check]]",
            'kind = "command"',
            f'name = "c{n}"',
            f'run = "echo {{level}} > {{out_file}} # {n}"',
            "timeout = 60",
            "vars = { level = 6 }",
            "[check.limits]",
            "max_seconds = 2.5",
        ]
    for n in range(checks):
        lines += [f"[profiles.quick.check.c{n}]", "timeout = 30"]
    (root / "stages" / "10-many.toml").write_text("\n".join(lines) + "\n")
    return root


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one `qualify plan` process."""
    cpu, start = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start, _children_cpu_s() - cpu
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    qualify = [sys.executable, "-m", "qualify", "plan"]
    with tempfile.TemporaryDirectory() as tmp:
        projects = {n: write_project(Path(tmp) / f"p{n}", n) for n in args.checks}
        cases = {
            (n, profile): [*qualify, "-C", str(root), *(["--profile", "quick"] if profile else [])]
            for n, root in projects.items()
            for profile in (False, True)
        }
        times: dict[tuple[int, bool], list[tuple[float, float]]] = {case: [] for case in cases}
        for _ in range(args.repeat):  # round robin, so load that comes and goes hits every case
            for case, argv in cases.items():
                times[case].append(timed(argv))
    smallest = min(args.checks)
    print(f"{'qualify plan':<34} {'fastest':>9} {'per check':>11} {'vs ' + str(smallest):>9} {'CPU':>9}")
    for (n, profile), seen in times.items():
        best = min(wall for wall, _ in seen)
        cpu = min(cpu for _, cpu in seen)
        base = min(wall for wall, _ in times[(smallest, profile)])
        label = f"{n} checks" + (" --profile quick" if profile else "")
        print(f"{label:<34} {best:7.3f} s {best / n * 1e3:8.3f} ms {best / base:8.1f}× {cpu:7.3f} s")
    print(f"target: under {TARGET_S:g} s for 10000 checks; load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
