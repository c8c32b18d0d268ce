"""A run set whose bench the set measures once for every member: a `metrics` bench whose units
are a small Python script (it stands in for an engine, which this machine cannot run), with
command checks at the other stages, and the positive control pinned."""

from __future__ import annotations

from collections.abc import Callable

from conftest import Project, command_stage

STAGES = ("build", "compile", "numerics", "serving", "soak")
# One unit: a few milliseconds of work and three samples at one speed (0.2 % noise), so the
# schedule takes a measurable time and decides at its one look; two seconds a unit once a file
# `slow` is beside the script, so that a rerun is still measuring when a test stops it.
UNIT = """
import json, random, sys, time
from pathlib import Path
out = sys.argv[1]
random.seed(Path(out).parent.parent.name + Path(out).name)
time.sleep(2.0 if (Path(__file__).parent / "slow").exists() else 0.05)
samples = [100 * (1 + random.gauss(0, 0.002)) for _ in range(3)]
metric = {"name": "tps", "unit": "t/s", "higher_is_better": True, "samples": samples}
json.dump({"schema_version": 1, "metrics": [metric]}, open(out, "w"))
"""


def bench_set(project: Callable[..., Project], candidates: tuple[str, ...] = ("cand",)) -> Project:
    """The project: pinned, `candidates` (each `.#NAME`), the bench `speed` of up to 10 pairs."""
    arms = "".join(f'[arms.{name}]\ninstallable = ".#{name}"\n' for name in candidates)
    p = project(f'[arms.pinned]\ninstallable = ".#default"\n{arms}[controls]\npositive = ["pinned"]\n')
    for index, name in enumerate(STAGES, start=1):
        p.stage(f"{index}0-{name}.toml", command_stage(name, "{py} -c pass"))
    p.script("unit.py", UNIT)
    p.stage(
        "60-bench.toml",
        'name = "bench"\n[[check]]\nkind = "bench"\nname = "speed"\nformat = "metrics"\n'
        "warmup = false\nlooks = 1\nmax_pairs = 10\nrun = '{py} {project}/unit.py {out_file}'\n",
    )
    p.stage("70-distribution.toml", command_stage("distribution", "{py} -c pass"))
    return p
