"""A run is resumed or rerun only on the GPU models it was made on: a lease of another model (an
H100 where the run began on an H200) would compare measurements of two models as one.

The GPUs are stand-ins: this machine has none, so `qualify.core.provenance.gpus` answers with
the GPU list nvidia-smi gives on those hosts. Everything else is a real run of a small project."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from conftest import Project, command_stage
from typer.testing import CliRunner

from qualify.cli import app
from qualify.core import provenance
from qualify.core.provenance import RecordedGpu
from qualify.pipeline.samegpus import require_same_gpus

H200 = {"vendor": "NVIDIA", "name": "NVIDIA H200", "source": "nvidia-smi", "target": "sm_90"}
H100 = {"vendor": "NVIDIA", "name": "NVIDIA H100 80GB HBM3", "source": "nvidia-smi", "target": "sm_90"}


def on(monkeypatch: pytest.MonkeyPatch, *gpus: dict[str, Any]) -> None:
    monkeypatch.setattr(provenance, "gpus", lambda: [dict(g) for g in gpus])


def test_a_resume_on_another_gpu_model_is_refused_and_on_the_same_goes_on(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project()
    p.stage("10-build.toml", command_stage("build", "true"))
    p.stage("20-compile.toml", command_stage("compile", "true"))
    runner = CliRunner()
    on(monkeypatch, H200)
    made = runner.invoke(app, ["run", "--candidate", "cand", "--project", str(p.root)])
    assert made.exit_code in (0, 1, 3), made.output
    [run] = p.run_dirs()
    compiled = (run / "20-compile" / "stage.json").read_text()
    invoked = len(json.loads((run / "run.json").read_text())["invocations"])
    on(monkeypatch, H100)
    refused = runner.invoke(app, ["run", "--run", run.name, "--only", "compile", "--project", str(p.root)])
    assert refused.exit_code == 4, refused.output
    assert "NVIDIA H200" in refused.output and "NVIDIA H100 80GB HBM3" in refused.output
    assert (run / "20-compile" / "stage.json").read_text() == compiled  # nothing ran
    assert len(json.loads((run / "run.json").read_text())["invocations"]) == invoked
    on(monkeypatch, H200)
    rerun = runner.invoke(app, ["run", "--run", run.name, "--only", "compile", "--project", str(p.root)])
    assert rerun.exit_code in (0, 1, 3), rerun.output
    assert len(json.loads((run / "run.json").read_text())["invocations"]) == invoked + 1


def test_the_count_of_each_model_counts_and_no_gpu_agrees_with_no_gpu() -> None:
    require_same_gpus("r", [], [])
    require_same_gpus("r", [RecordedGpu(**H200)], [H200])
    with pytest.raises(Exception, match="2 × NVIDIA NVIDIA H200 sm_90"):
        require_same_gpus("r", [RecordedGpu(**H200)] * 2, [H200])
    with pytest.raises(Exception, match="was made on no GPU"):
        require_same_gpus("r", [], [H100])
