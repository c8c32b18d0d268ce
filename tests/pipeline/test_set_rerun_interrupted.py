"""A run set's shared measurement made again: while it measures, and after it is interrupted,
no member still shows the earlier attempt's verdict for that stage.

Before, a bench that the set measures once for every member moved only the set's shared folder
aside when it was run again; each member's stage record kept the first attempt's verdict (an
ERROR on a GPU host whose servers had died) beside the new attempt's data, and a report of the
interrupted rerun showed that ERROR as the bench's outcome.

The set is real (`metricsets.py`): a `metrics` bench whose units are a small Python script (it
stands in for an engine, which this machine cannot run), measured once for a candidate and the
positive control; the rerun is a real `qualify` process stopped with SIGTERM, as a lease's end stops one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Project
from metricsets import bench_set
from typer.testing import CliRunner

from qualify.cli import app
from qualify.core.runstore import RunDir
from qualify.core.verdicts import StageState
from qualify.pipeline.ondisk import stages_on_disk

runner = CliRunner()
MEMBERS = ("cand", "positive-pinned")


def bench_state(run: Path, member: str) -> StageState | str:
    (bench,) = [s for s in stages_on_disk(RunDir(run / member)) if s.name == "bench"]
    return bench.outcome


@pytest.mark.slow
def test_an_interrupted_rerun_of_a_shared_bench_leaves_no_member_with_the_old_verdict(
    project: Callable[..., Project],
) -> None:
    p = bench_set(project)
    result = runner.invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    assert result.exit_code == 0, result.output
    (run,) = p.run_dirs()
    before = {m: bench_state(run, m) for m in MEMBERS}
    assert all(state not in (StageState.NOT_RUN, StageState.INTERRUPTED) for state in before.values()), before

    (p.root / "slow").write_text("")
    rerun = subprocess.Popen(
        [sys.executable, "-m", "qualify", "run", "--run", run.name, "--only", "bench", "--force", "--no-gate",
         "--project", str(p.root)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        # The rerun is measuring once the first attempt's shared folder has moved aside and a
        # unit of its own has begun.
        deadline = time.monotonic() + 60
        while not (run / "60-bench" / "attempts" / "1").is_dir() or not list(
            (run / "60-bench" / "speed").glob("*/units/*")
        ):
            assert rerun.poll() is None and time.monotonic() < deadline, "the rerun never measured"
            time.sleep(0.1)
        during = {m: bench_state(run, m) for m in MEMBERS}
        os.killpg(rerun.pid, signal.SIGTERM)
        assert rerun.wait(timeout=60) != 0
    finally:
        if rerun.poll() is None:
            os.killpg(rerun.pid, signal.SIGKILL)
    after = {m: bench_state(run, m) for m in MEMBERS}
    for member in MEMBERS:
        assert during[member] is StageState.NOT_RUN, during
        assert after[member] in (StageState.NOT_RUN, StageState.INTERRUPTED), after
        kept = json.loads((run / member / "60-bench" / "attempts" / "1" / "stage.json").read_text())
        assert kept["verdict"] == before[member].value  # the first attempt's record, kept aside

    (p.root / "slow").unlink()
    result = runner.invoke(
        app, ["run", "--run", run.name, "--only", "bench", "--force", "--project", str(p.root)]
    )
    assert result.exit_code == 0, result.output
    for member in MEMBERS:
        assert bench_state(run, member) == before[member]
