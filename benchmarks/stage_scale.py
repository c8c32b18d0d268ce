"""How `qualify run` scales with the number of checks in one stage, measured in one run.

    python benchmarks/stage_scale.py [--checks 100 1000] [--repeat 2]

Writes a project per size: the default two arms (no build stage, so nothing is built) and one
stage of N `command` checks, each running `true` for both roles. Then runs
`qualify run --candidate cand` as a real process on each, in turn (load that comes and goes on
a busy machine hits every size alike), with the commands contained as a run contains them (a
cgroup, the read-only mount, a PID namespace, as nobody: the project lies in a folder nobody can
read). It prints, per size, the fastest wall time and the CPU time (user + system of qualify and
its commands, which other load does not stretch) of the whole process and of the stage alone
(its `duration_s`), the time per check, and time(largest) / (largest/smallest × time(smallest))
against the 1.2 target: a check costs the same whether it is the first or the thousandth, so
nothing a check does (saving stage.json, the seal, comparing the sealed files) may grow with the
checks done before it.

Baseline, when stage.json was checked and written whole after every check, before containment
and the seal: 100 checks 13.9 s, 900 checks 146 s. With containment and the seal, stage.json
(the stage's whole plan in it) and seal.json were written whole after every check, seal.json
up to four times, and every sealed file compared after each: on this 2-core machine, busy
(load 6 to 10), `--repeat 1`: 100 checks 24.7 s wall, 5.3 s CPU; 1000 checks 459 s wall, 120 s
CPU: 1.86 (wall), 2.28 (CPU).
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


def timed(root: Path) -> tuple[float, float, float]:
    """Wall and CPU seconds of one `qualify run` process, and its stage's own seconds; the run
    folder is removed after, so every run of a size starts from the same runs directory."""
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checks", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    # The commands run as nobody (qualify's default as root), who must reach the project.
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        projects = {n: write_project(Path(tmp) / f"p{n}", n) for n in args.checks}
        times: dict[int, list[tuple[float, float, float]]] = {n: [] for n in projects}
        for round_ in range(args.repeat):  # round robin, so load that comes and goes hits every size
            for n, root in projects.items():
                times[n].append(seen := timed(root))
                print(f"round {round_ + 1}: {n} checks {seen[0]:.1f} s wall, {seen[1]:.1f} s CPU", flush=True)
    smallest, largest = min(args.checks), max(args.checks)
    best = {n: tuple(min(column) for column in zip(*seen, strict=True)) for n, seen in times.items()}
    print(f"{'qualify run':<14} {'wall':>9} {'CPU':>9} {'stage':>9} {'per check':>11} {'CPU/check':>11}")
    for n, (wall, cpu, stage) in best.items():
        print(
            f"{n:>5} checks   {wall:7.1f} s {cpu:7.1f} s {stage:7.1f} s"
            f" {wall / n * 1e3:8.1f} ms {cpu / n * 1e3:8.1f} ms"
        )
    scale = largest / smallest
    for i, what in enumerate(("wall", "CPU", "stage")):
        ratio = best[largest][i] / (scale * best[smallest][i])
        print(f"{what:>5}: time({largest}) / ({scale:g} × time({smallest})) = {ratio:.2f} (target {TARGET})")
    print(f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
