"""How long a run set's serving stage takes with pinned measured once for all its members,
against pinned measured again beside each member (as the stage measured a set before).

    python benchmarks/serving_set.py RUNS_DIR RUN_ID [-C examples/llama-cpp]

RUN_ID is a saved run set of the project (the CPU example's quick set with its controls, as
`make demo` leaves it). Its serving stage is rerun twice in this process, one after the other:
first with each member measured on its own (the `openai-suite` kind without its member view:
pinned's server and suites again for every member, a timing schedule per member), then measured
together. Prints each wall time, how many servers each started, and the ratio. Both reruns
replace the set's serving results; the second is the one left.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qualify.checks import registry
from qualify.cli import app
from qualify.kinds import KINDS

SERVING = "openai-suite"


def rerun(
    runs: Path, run_id: str, project: Path, *, together: bool, output: Path | None
) -> tuple[float, int]:
    """Wall seconds of one rerun of the set's serving stage, and the servers it started."""
    kinds = (
        KINDS if together else tuple(replace(k, member_view=None) if k.name == SERVING else k for k in KINDS)
    )
    registry.install(kinds)
    started = time.perf_counter()
    argv = ["run", "--run", run_id, "--only", "serving", "--force", "--allow-dirty"]
    result = CliRunner().invoke(app, [*argv, "--project", str(project), "--runs-dir", str(runs)])
    seconds = time.perf_counter() - started
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        (output / ("together.txt" if together else "alone.txt")).write_text(result.output)
    if result.exit_code not in (0, 1, 3):
        raise SystemExit(f"the rerun failed ({result.exit_code}):\n{result.output[-3000:]}")
    return seconds, result.output.count("server ready at")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path)
    parser.add_argument("run_id")
    parser.add_argument("-C", "--project", type=Path, default=Path("examples/llama-cpp"))
    parser.add_argument("--output", type=Path, help="a folder for each rerun's console output")
    args = parser.parse_args()
    before, before_servers = rerun(args.runs, args.run_id, args.project, together=False, output=args.output)
    print(f"each member on its own:   {before:7.1f} s, {before_servers} servers started", flush=True)
    after, after_servers = rerun(args.runs, args.run_id, args.project, together=True, output=args.output)
    print(f"measured together:        {after:7.1f} s, {after_servers} servers started")
    print(f"ratio (together / alone): {after / before:7.2f}")


if __name__ == "__main__":
    main()
