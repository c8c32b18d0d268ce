"""`together = true`: a block's units start at once, held to one CPU, so that every role samples
the same stretch of a host whose speed changes within a second; their repetitions are valued by
the mean of their logs. Refused for the formats that time by the wall clock."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, Project
from typer.testing import CliRunner

from qualify.bench.judge import unit_center
from qualify.cli import app
from qualify.core.errors import ConfigError
from qualify.core.runstore import read_json
from qualify.pipeline.plan import load_plan
from qualify.stats import abtests

# One unit: ten samples of a fixed loop, timed by the thread's CPU time as ck-bench times; it
# writes beside its metrics when it ran and on which CPUs it could.
SPIN_UNIT = """
import json, os, sys, time
start, cpus = time.time(), sorted(os.sched_getaffinity(0))
samples = []
for _ in range(10):
    began = time.thread_time()
    x = 0
    for i in range(300000):
        x += i * i
    samples.append((time.thread_time() - began) * 1e6)
json.dump({"schema_version": 1, "metrics": [{"name": "spin", "unit": "us",
           "higher_is_better": False, "samples": samples}]}, open(sys.argv[1], "w"))
json.dump({"start": start, "end": time.time(), "cpus": cpus}, open(sys.argv[1] + ".ran", "w"))
"""


@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset (util-linux) holds units to a CPU")
def test_a_block_s_units_run_at_once_on_one_cpu(project: Callable[..., Project]) -> None:
    """A real command (a loop timed by its thread's CPU time), pinned against itself and a
    second copy of itself, a run set's three roles: every block's units overlap in time and each
    could run on one CPU only, the same for all, the last this process may use; the schedule
    says so."""
    p = project(
        """
        [arms.pinned]
        installable = ".#default"
        [arms.again]
        installable = ".#default"
        [arms.third]
        installable = ".#default"
        """
    )
    script = p.script("unit.py", SPIN_UNIT)
    p.stage(
        "60-bench.toml",
        f"""
        [[check]]
        kind = "bench"
        name = "spin"
        format = "metrics"
        together = true
        run = "{{py}} {script} {{out_file}}"
        looks = 1
        max_pairs = 6
        limits = {{ speed_margin = 0.5 }}
        """,
    )
    result = CliRunner().invoke(
        app, ["run", "--candidate", "again", "--candidate", "third", "--project", str(p.root)]
    )
    assert result.exit_code in (0, 1, 3), result.output
    folder = p.run_dirs()[0] / "60-bench" / "spin"
    schedule = read_json(folder / "schedule.json")
    held = max(os.sched_getaffinity(0))
    assert schedule["design"] == f"Williams, 3 roles, units together on CPU {held}", schedule["design"]
    blocks: dict[object, list[dict[str, float]]] = {}
    for unit in schedule["units"]:
        assert unit["ok"], unit
        ran = json.loads((folder / (unit["output"] + ".ran")).read_text())
        assert ran["cpus"] == [held], (unit["index"], ran)
        blocks.setdefault((unit["phase"], unit["pair"]), []).append(ran)
    assert len(blocks) >= 7, list(blocks)  # the warm-up block, then six pairs at least
    for block, units in blocks.items():
        assert len(units) == 3, block
        # At once: each started before any of the others ended.
        assert max(u["start"] for u in units) < min(u["end"] for u in units), (block, units)


def test_units_together_are_valued_by_the_mean_of_their_logs() -> None:
    assert unit_center("metrics", together=True) is abtests.log_mean
    assert unit_center("metrics") is abtests.log_median


@pytest.mark.parametrize("fmt", ["llama-bench", "llama-server"])
def test_together_is_refused_for_an_engine_timed_by_the_wall_clock(tmp_path: Path, fmt: str) -> None:
    run = "{bin}/llama-server --port {port}" if fmt == "llama-server" else "{bin}/llama-bench -o jsonl"
    (tmp_path / "60-bench.toml").write_text(
        f'[[check]]\nkind = "bench"\nname = "b"\nformat = "{fmt}"\nrun = "{run}"\ntogether = true\n'
    )
    with pytest.raises(ConfigError, match=f'together = true is for format "metrics".*not "{fmt}"'):
        load_plan(tmp_path)


def test_on_a_two_speed_host_units_together_decide_where_units_in_turn_cannot() -> None:
    """examples/c-kernels/two_speed_host.py, the c-kernels run set on a host whose speed switches
    between two states about twice a second (one test twice as slow in the slow one), through
    the bench's judge, 60 sets a design: with the units together the positive control passes
    in nearly every set; one after another it is left undecided in about half. Neither calls
    the A/A a regression, nor lets a test slower by exactly δ pass; nor does the together
    design with heavy-tailed noise or on a sawtooth host."""
    example = REPO / "examples" / "c-kernels"
    sys.path.insert(0, str(example))
    try:
        import two_speed_host as hs
    finally:
        sys.path.remove(str(example))
    together = hs.shares(hs.TOGETHER, 2.0, runs=60)
    in_turn = hs.shares(hs.IN_TURN, 2.0, runs=60)
    assert together["A/A passes"] >= 0.95 and in_turn["A/A passes"] <= 0.7, (together, in_turn)
    for got in (together, in_turn):
        assert got["A/A false alarm"] == 0 and got["δ slower passes"] <= 1 / 60, got
    # The same bounds where the samples' noise is heavy-tailed, and on a host whose slowdown grows
    # and drops back every 3 s (a sawtooth), 40 sets each: units together still decide the A/A.
    for shape in hs.SHAPES[1:]:
        got = hs.shares(hs.TOGETHER, 2.0, runs=40, shape=shape)
        assert got["A/A false alarm"] == 0 and got["δ slower passes"] <= 1 / 40, (shape, got)
        assert got["A/A passes"] >= 0.9, (shape, got)
