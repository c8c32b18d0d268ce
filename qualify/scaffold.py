"""`qualify init`: a starting qualify.toml, a copy of the default plan, a .gitignore that keeps
the runs out of the source tree, and the next steps."""

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
# A command runs in its role's folder of the run: name files from {project}, the project's folder.
model = "{project}/models/model.gguf"   # the model every stage runs
corpus = "{project}/data/corpus.txt"    # the text the numerics stage scores
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


#: What a project's .gitignore needs for qualify: the runs are written inside the project, and a
#: tracked tree with them in it would make every build "dirty" (uncommitted changes).
IGNORED = ("runs/",)


def init_project(directory: Path, *, force: bool = False) -> list[Path]:
    """Write qualify.toml and stages/ into `directory` and add runs/ to its .gitignore; refuse to
    overwrite qualify.toml or stages/ unless `force`."""
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
    written = [config, stages]
    if ignore_runs(directory / ".gitignore"):
        written.append(directory / ".gitignore")
    return written


def ignore_runs(gitignore: Path) -> bool:
    """Add the lines of `IGNORED` that `gitignore` lacks (kept as it is otherwise); whether it
    changed."""
    text = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in IGNORED if line not in present and "/" + line not in present]
    if not missing:
        return False
    lead = "" if not text or text.endswith("\n") else "\n"
    block = "# qualify's runs (reports, logs, measurements): kept out of the source tree\n"
    gitignore.write_text(text + lead + block + "\n".join(missing) + "\n", encoding="utf-8")
    return True


def next_steps(directory: Path) -> list[str]:
    """What to do after `qualify init`, in order, as commands to type where possible."""
    here = directory.resolve() == Path.cwd().resolve()
    where, git = ("", "") if here else (f" -C {directory}", f" -C {directory}")
    steps = []
    if not (directory / "flake.nix").is_file():
        steps.append(
            "write flake.nix with an output per arm (.#default, .#candidate, .#reference), "
            "each the engine built by one toolchain"
        )
    steps += [
        f"edit {directory / CONFIG_NAME}: the arms' installables and the variables (model, corpus)",
        f"qualify doctor{where}    # nix with flakes, the flake, the arms, the data files, the GPU",
        f"qualify plan{where}      # the stages and checks as they will run",
        # A flake sees only tracked files, and the arms are built from a committed tree.
        f"git{git} add flake.nix {CONFIG_NAME} stages .gitignore && git{git} commit",
        f"qualify run{where} --candidate candidate",
    ]
    return steps
