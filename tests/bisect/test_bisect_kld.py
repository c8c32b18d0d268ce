"""`qualify bisect --gate numerics/CHECK/METRIC` on a `kld` check: one of its limits (`mean_kld`)
or non-inferiority, judged by the real numerics stage on every probed step.

Stand-in: each arm's "engine" copies a llama.cpp `--kl-divergence-base` file prepared for it
(synthetic logits: the reference's, and each arm's at its own distance from them); the files,
the stage and every step after them are the real ones. The build stage is a command, as in
test_bisect_command.py, for the same reason: no step here has anything to build."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import Project
from test_bisect_command import bisect, bisect_folder

from qualify.numerics.llamalogits import write_llama_logits

CHUNKS, CTX, VOCAB = 48, 16, 48
ROWS = CTX - 1 - CTX // 2
COPY = """
import shutil, sys
shutil.copyfile(sys.argv[1], sys.argv[2])
"""
#: Each arm's logits: the reference's plus noise of this σ (KL grows with σ²).
SIGMAS = (0.05, 0.05, 0.05, 0.3, 0.3)


def kld_project(make: Callable[..., Project], tmp_path: Path) -> Project:
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, VOCAB, (CHUNKS, CTX)).astype(np.int32)
    ref = rng.normal(0, 3, (CHUNKS, ROWS, VOCAB)).astype(np.float32)

    def artifact(name: str, sigma: float) -> Path:
        logits = ref + rng.normal(0, sigma, ref.shape).astype(np.float32)
        return write_llama_logits(tmp_path / f"{name}.kld", tokens, list(logits))

    config = ['pinned = "s0"', "[arms.reference]", 'installable = ".#reference"']
    config += [f'vars = {{ art = "{write_llama_logits(tmp_path / "ref.kld", tokens, list(ref))}" }}']
    for i, sigma in enumerate(SIGMAS):
        config += [
            f"[arms.s{i}]",
            f'installable = ".#s{i}"',
            f'vars = {{ art = "{artifact(f"s{i}", sigma)}" }}',
        ]
    config += ["[series.move]", "arms = [" + ", ".join(f'"s{i}"' for i in range(len(SIGMAS))) + "]"]
    p = make("\n".join(config) + "\n")
    p.script("copy.py", COPY)
    p.stage("10-build.toml", 'name = "build"\n[[check]]\nkind = "command"\nname = "make"\nrun = "true"\n')
    p.stage(
        "30-numerics.toml",
        'name = "numerics"\n[[check]]\nkind = "kld"\nname = "kld"\n'
        'roles = ["pinned", "candidate", "reference"]\nfloor_rerun = false\nresamples = 1000\n'
        f"run = '''{sys.executable} {{project}}/copy.py {{art}} {{out_file}}'''\n"
        "limits = { max_mean_kld = 0.01, noninferiority_margin = 0.5 }\n",
    )
    return p


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["mean_kld", "noninferiority"])
def test_a_kld_limit_or_noninferiority_flips_where_the_candidate_moved(
    project: Callable[..., Project], tmp_path: Path, metric: str
) -> None:
    """s0..s2 as close to the reference as pinned, s3 and s4 36 times as far (KL ∝ σ²): both
    the mean KLD limit and non-inferiority first fail at s3. Each probe keeps the figure the
    limit was judged on, the arm's and pinned's mean KL from the reference."""
    p = kld_project(project, tmp_path)
    result = bisect(p, "move", "--gate", f"numerics/kld/{metric}", "--no-gate", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert (document["answer"]["good"], document["answer"]["bad"]) == (2, 3), document["answer"]
    good, bad = document["steps"][2], document["steps"][3]
    assert good["verdict"] == "PASS" and bad["verdict"] == "FAIL", (good, bad)
    # KL grows with σ² at this noise: 36 times pinned's, within a few percent.
    ratio = bad["figure"]["candidate"] / bad["figure"]["pinned"]
    assert 30 < ratio < 42, bad["figure"]
    assert abs(good["figure"]["candidate"] / good["figure"]["pinned"] - 1) < 0.2, good["figure"]
    assert bad["figure"]["pinned"] == good["figure"]["pinned"]
    table = (bisect_folder(p) / "bisect.md").read_text()
    assert f"numerics/kld/{metric} FAIL" in table


def test_a_kld_check_offers_its_limits_and_noninferiority_as_metrics(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = kld_project(project, tmp_path)
    result = bisect(p, "move", "--gate", "numerics/kld/p99_kld")
    assert result.returncode == 4, result.stdout + result.stderr
    assert "has no limit on a metric 'p99_kld'" in result.stderr
    assert "mean_kld, noninferiority" in result.stderr
    assert not any(p.runs.iterdir()) if p.runs.exists() else True
