"""How much CPU the CLI takes to start, next to a bare interpreter, measured in one run.

    python benchmarks/cli_start.py [--repeat 9]

Runs `qualify --version`, `qualify --help` and `qualify plan` (on the bundled llama.cpp example)
as child processes, in turn with `python -c pass`, and reads each child's CPU time (user + system,
`os.wait4`): unlike wall time it does not count the time a busy machine makes a process wait,
though a machine whose cores are shared still slows every line alike. The children may write
their bytecode (PYTHONDONTWRITEBYTECODE is left out of their environment) and a first round is
not counted, so each command is measured as an installed qualify starts: from compiled modules,
not compiling qualify's sources every time. Prints the median and the
lowest of the repetitions next to each command's target: 0.15 s for `--version` and `--help`
(typer, the commands' declarations, nothing a command's body imports), 0.3 s for `plan` (its
plan read, checked and printed; typer's own argument conversion imports pydantic there). The
figures are printed, never judged: tests/test_cli_start.py holds what keeps them low, the
modules each command does not import.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: Each command, and the most CPU seconds it should take.
QUALIFY = [sys.executable, "-m", "qualify"]
CASES: dict[str, tuple[list[str], float | None]] = {
    "python -c pass (baseline)": ([sys.executable, "-c", "pass"], None),
    "qualify --version": ([*QUALIFY, "--version"], 0.15),
    "qualify --help": ([*QUALIFY, "--help"], 0.15),
    "qualify plan -C examples/llama-cpp": (
        [*QUALIFY, "plan", "-C", str(REPO / "examples" / "llama-cpp")],
        0.3,
    ),
}


def cpu_s(argv: list[str]) -> float:
    """The child's user and system CPU seconds; a command that fails is not a figure."""
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="runs of each command (default 9)")
    args = parser.parse_args()
    env_path = os.environ.get("PYTHONPATH", "")
    if str(REPO) not in env_path.split(os.pathsep):
        # The children import this checkout's qualify, whatever is installed.
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env_path) if p)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    for argv, _target in CASES.values():
        cpu_s(argv)  # writes the bytecode of what the command imports; not counted
    seen: dict[str, list[float]] = {label: [] for label in CASES}
    for _ in range(max(args.repeat, 1)):  # round robin: load that comes and goes hits every case
        for label, (argv, _target) in CASES.items():
            seen[label].append(cpu_s(argv))
    print(f"CPU seconds (user + system) of {args.repeat} runs each, {sys.executable}")
    print(f"{'':<36} {'median':>8} {'lowest':>8} {'target':>8}")
    for label, (_argv, target) in CASES.items():
        aim = f"{target:6.2f} s" if target is not None else f"{'':>8}"
        within = "" if target is None else ("  ok" if statistics.median(seen[label]) <= target else "  OVER")
        print(f"{label:<36} {statistics.median(seen[label]):6.3f} s {min(seen[label]):6.3f} s {aim}{within}")


if __name__ == "__main__":
    main()
