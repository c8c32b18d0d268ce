"""`qualify init`: a starting qualify.toml and a copy of the default plan."""

from __future__ import annotations

import shutil
from pathlib import Path

from qualify.core.config import CONFIG_NAME
from qualify.core.errors import UsageError
from qualify.pipeline.plan import default_plan_dir

TEMPLATE = """\
# qualify.toml: what `qualify run --candidate ARM` compares.
flake = "."
plan = "stages"          # the project's own plan (copied from qualify's default by `init`)

[arms.pinned]            # the toolchain the project ships today
installable = ".#default"
devshell = ".#default"

[arms.candidate]         # the toolchain to move to; rename it (e.g. rocm10)
installable = ".#candidate"
devshell = ".#candidate"

[arms.reference]         # what numerics are scored against (a portable or higher-precision build)
installable = ".#reference"

[vars]                   # placeholders for the plan's command templates
model = "models/model.gguf"     # the model every stage runs
corpus = "data/corpus.txt"      # the text the numerics stage scores
engine_args = []

# Controls, run with every qualification (`--no-controls` leaves them out): the pinned arm
# against itself must pass every stage; an arm that must be caught must fail the stages named.
# [arms.kvq4]
# installable = ".#default"
# vars = { engine_args = ["-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on"] }
# [controls]
# positive = ["pinned"]
# negative = { kvq4 = ["numerics"] }
"""


def init_project(directory: Path, *, force: bool = False) -> list[Path]:
    """Write qualify.toml and stages/ into `directory`; refuse to overwrite unless `force`."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / CONFIG_NAME
    stages = directory / "stages"
    for path in (config, stages):
        if path.exists() and not force:
            raise UsageError(f"{path} already exists", "pass --force to overwrite it")
    config.write_text(TEMPLATE, encoding="utf-8")
    if stages.exists():
        shutil.rmtree(stages)
    shutil.copytree(default_plan_dir(), stages)
    return [config, stages]
