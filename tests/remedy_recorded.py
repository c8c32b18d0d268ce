"""An example's recorded remedy, judged again from its saved units (`qualify remedy --no-build`),
and the figures its README must give: shared by the ROCm and CUDA examples' tests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

Answer = dict[str, Any]


def rejudge_remedy(archives: Sequence[Path], runs: Path, run: str, example: Path) -> tuple[Answer, Answer]:
    """The recorded answer and today's: `archives` (the run's, then its remedy's) unpacked into
    `runs`, and the run `run` (a path under `runs`) remedied again with nothing built."""
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(runs, filter="data")
    where = runs / run
    recorded = json.loads((where.parent / f"remedy-{where.name}" / "remedy-report.json").read_text())
    argv = [sys.executable, "-m", "qualify", "remedy", str(where), "--no-build", "--json"]
    argv += ["-C", str(example), "--runs-dir", str(runs)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return recorded, json.loads(done.stdout)


def assert_readme_figures(example: Path, now: Answer, variants: Sequence[str]) -> None:
    """The example's README gives the failing kernels and, per variant, what it brings back and
    breaks, as `| `NAME` | BACK of FAILING | BROKEN |`."""
    text = re.sub(r"\s+", " ", (example / "README.md").read_text())
    failing = sum(len(f["failing"]) for f in now["failing"])
    assert f"{failing} failing kernels in {len(now['failing'])} source files" in text
    for name in variants:
        totals = now["variants"][name]["totals"]
        said = (
            f"| `{name}` | {totals['recovered']} of {totals['failing_before']} | {totals['newly_broken']} |"
        )
        assert said in text, said


def assert_judged_as_recorded(recorded: Answer, now: Answer) -> None:
    """Today's judgement is the recorded one, every unit was built and each unit holds its
    file's kernels, no more, no fewer."""
    assert now["variants"] == recorded["variants"] and now["failing"] == recorded["failing"]
    for variant in now["variants"].values():
        assert variant["not_built"] == {}
        for outcome in variant["sources"]:
            assert outcome["recovered"] + outcome["still_failing"] == outcome["failing_before"]
            assert outcome["missing"] == outcome["extra"] == 0  # each unit is its file's kernels


def assert_as_built_reproduces(now: Answer) -> None:
    """The `as-built` variant's units (no flag) change nothing: figures, warnings, code bytes."""
    for outcome in now["variants"]["as-built"]["sources"]:
        assert outcome["recovered"] == outcome["newly_broken"] == 0
        assert outcome["code_change_pct"] == 0 and outcome["warn_before"] == outcome["warn_after"]
