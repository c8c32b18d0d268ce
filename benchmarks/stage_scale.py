"""How `qualify run` scales with the number of checks in one stage, measured in one run.

    python benchmarks/stage_scale.py [--checks 100 1000] [--repeat 1]

Writes two projects: the default two arms (no build stage, so nothing is built) and one stage
of N `command` checks, each running `true` for both roles. Then runs `qualify run --candidate
cand` as a real process, with the commands contained as a run contains them (a cgroup, the
read-only mount, a PID namespace, as nobody: the projects lie in a folder nobody can read).
Each round runs the small project as many times as it takes to make the large one's checks (10
× 100), half before and half after one run of the large project, so that load that comes and
goes on a busy machine falls on both sides alike. It prints, per round and over all rounds, the
wall time and the CPU time (user + system of qualify and its commands, which other load does not
stretch) of the processes and of the stage alone (its `duration_s`), the time per check, and
time(1000) / (10 × time(100)) against the 1.2 target: a check costs the same whether it is the
first or the thousandth, so nothing a check does (saving stage.json, the seal, comparing the
sealed files) may grow with the checks done before it.

Baseline, when stage.json was checked and written whole after every check, before containment
and the seal: 100 checks 13.9 s, 900 checks 146 s. With containment and the seal, stage.json
(the stage's whole plan in it) and seal.json were written whole after every check, seal.json
up to four times, and every sealed file compared after each (commit db05a03). On this 2-core
machine, shared with a test run and nix builds, `python benchmarks/stage_scale.py --repeat 1`:
10 × 100 checks 149.1 s wall, 48.7 s CPU; 1000 checks 258.7 s wall, 114.9 s CPU: 1.74 (wall),
2.36 (CPU), 1.90 (stage) (load 3; an earlier one-run-each measure at load 6 to 10: 100
checks 24.7 s, 5.3 s CPU, 1000 checks 459 s, 120 s CPU).

Now stage.json is saved as the stage starts and ends and at most once a second between, a
check's files and records are sealed together as it ends (one write of seal.json), and where no
command can write a record (read-only mount, nobody, a cgroup) the sealed files are compared
with that progress save, not after every check. `python benchmarks/stage_scale.py --repeat 2`
(load 8 falling to 3): round 1 0.62 wall, 0.94 CPU; round 2 1.32 wall, 1.02 CPU; both:
10 × 100 checks 229.1 s wall, 79.9 s CPU; 1000 checks 203.2 s wall, 78.4 s CPU: 0.89 (wall),
0.98 (CPU), 0.98 (stage). Again with `--repeat 1` at load 2 to 3: 104.9 s, 38.9 s CPU against
85.4 s, 36.6 s CPU: 0.81 (wall), 0.94 (CPU), 0.88 (stage). The CPU time is 37 to 40 ms a check
at either size; the wall time swings with the machine's other load, round by round.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.2  # time(1000) against 10 × time(100)
INCOMPLETE = 3  # the exit code of a run whose other stages are not configured
Times = tuple[float, float, float]  # wall, CPU and the stage's own seconds


def write_project(root: Path, checks: int) -> Path:
    root.mkdir(parents=True)
    (root / "qualify.toml").write_text(
        'plan = "stages"\n[arms.pinned]\ninstallable = ".#default"\n[arms.cand]\ninstallable = ".#cand"\n'
    )
    (root / "stages").mkdir()
    lines = ['name = "many"']
    for n in range(checks):
        lines += ["[[check]]", 'kind = "command"', f'name = "c{n}"', 'run = "true"']
    (root / "stages" / "10-many.toml").write_text("\n".join(lines) + "\n")
    return root


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(root: Path) -> Times:
    """Wall and CPU seconds of one `qualify run` process, and its stage's own seconds; the run
    folder is removed after, so every run of a project starts from the same runs directory."""
    argv = [sys.executable, "-m", "qualify", "run", "-C", str(root), "--candidate", "cand"]
    cpu, start = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall, used = time.perf_counter() - start, _children_cpu_s() - cpu
    runs = root / "runs"
    stage = [json.loads(p.read_text()) for p in runs.glob("*/10-many/stage.json")]
    if done.returncode != INCOMPLETE or len(stage) != 1 or stage[0].get("verdict") != "PASS":
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    shutil.rmtree(runs)
    return wall, used, float(stage[0]["duration_s"])


def total(seen: list[Times]) -> Times:
    wall, cpu, stage = (sum(column) for column in zip(*seen, strict=True))
    return wall, cpu, stage


def report(label: str, small: int, large: int, smalls: Times, big: Times, rounds: int = 1) -> None:
    times, checks = large // small, large * rounds
    print(f"{label}:")
    for i, what in enumerate(("wall", "CPU", "stage")):
        per_small, per_large = smalls[i] / checks * 1e3, big[i] / checks * 1e3
        print(
            f"  {what:>5}: {times} × {small} checks {smalls[i]:7.1f} s ({per_small:6.1f} ms a check),"
            f" {large} checks {big[i]:7.1f} s ({per_large:6.1f} ms a check):"
            f" {big[i] / smalls[i]:.2f} (target {TARGET})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checks", type=int, nargs=2, default=[100, 1000], metavar=("SMALL", "LARGE"))
    parser.add_argument("--repeat", type=int, default=1, help="rounds")
    args = parser.parse_args()
    small, large = sorted(args.checks)
    times = large // small
    smalls: list[Times] = []
    bigs: list[Times] = []
    # The commands run as nobody (qualify's default as root), who must reach the projects.
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        few, many = write_project(Path(tmp) / "small", small), write_project(Path(tmp) / "large", large)
        for round_ in range(args.repeat):
            these = [timed(few) for _ in range(times // 2)]
            bigs.append(timed(many))
            these += [timed(few) for _ in range(times - times // 2)]
            smalls.append(total(these))
            report(f"round {round_ + 1}", small, large, smalls[-1], bigs[-1])
    if args.repeat > 1:
        report(f"all {args.repeat} rounds", small, large, total(smalls), total(bigs), args.repeat)
    print(f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
