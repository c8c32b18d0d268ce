"""How long `qualify report` takes on a saved run, and how large its files are.

    python benchmarks/report_render.py RUN_DIR [--repeat 5]

RUN_DIR is a run directory (for example the bundled example's full run under
examples/llama-cpp/runs/). The run is copied to a temporary directory first, so the files of
the original are not rewritten. Prints the best and median wall time of rendering (view model,
charts, HTML, Markdown, JSON) and each file's size; the goal for the example's full run is
under 1 s and under 2 MB of HTML. The figures are printed, never judged.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from qualify.core.runstore import RunDir
from qualify.report.render import render


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dir", type=Path, help="a saved run directory (holds run.json)")
    parser.add_argument("--repeat", type=int, default=5, help="renders to time (default 5)")
    args = parser.parse_args()
    if not (args.run_dir / "run.json").is_file():
        parser.error(f"{args.run_dir}: no run.json here; give a run directory")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / args.run_dir.name
        # gcroots are symlinks into the nix store; copy them as links.
        shutil.copytree(args.run_dir, copy, symlinks=True)
        run = RunDir(copy)
        times = []
        for _ in range(max(args.repeat, 1)):
            start = time.perf_counter()
            files = render(run)
            times.append(time.perf_counter() - start)
        print(f"run {args.run_dir.name}: {len(times)} renders")
        print(f"  wall time  best {min(times):.3f} s   median {statistics.median(times):.3f} s")
        for path in (files.html, files.markdown, files.json):
            print(f"  {path.name:12} {path.stat().st_size / 1024:10.1f} KiB")


if __name__ == "__main__":
    main()
