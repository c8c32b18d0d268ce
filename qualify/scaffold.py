"""`qualify init`: a starting qualify.toml, a copy of the default plan whose kernel check fits the
engine at hand, a .gitignore that keeps the runs and nix's result links out of the source tree,
and the next steps."""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

from qualify.compile.enginedetect import detect
from qualify.compile.enginekind import EngineKind, family_words, toml_strings
from qualify.core.config import CONFIG_NAME
from qualify.core.errors import UsageError
from qualify.pipeline.plan import default_plan_dir
from qualify.stagefit import SKELETON, fit_stages

TEMPLATE = """\
# qualify.toml: what `qualify run` compares.
flake = "."
plan = "stages"          # the project's own plan (copied from qualify's default by `init`)
candidate = "candidate"  # what `qualify run` qualifies without --candidate (an arm, or a list)
# profile = "quick"      # the plan profile `qualify run` uses without --profile (the plan's own)

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

# The CI workflow's hosts (qualify's examples/ci/github-actions.yml): a job per host label, on the
# runners carrying these labels. Without [hosts], one job on a self-hosted runner, named by its
# hostname.
# [hosts]
# gfx1151 = ["self-hosted", "gfx1151"]
"""


#: What a project's .gitignore needs for qualify: the runs are written inside the project, and a
#: tracked tree with them in it would make every build "dirty" (uncommitted changes). The links
#: `nix build` leaves (`result`, `result-dev`, ...) lead into this machine's nix store: committed,
#: they lead nowhere on another; left untracked, every run's report lists them. `.qualify/` holds
#: the distribution stage's cache, sources' mirror and signing key (the default plan's paths):
#: a secret key must never be committed.
IGNORED = ("runs/", "result", "result-*", ".qualify/")


#: The default plan's stage file holding the kernel check `init` fits to the engine.
COMPILE_STAGE = "20-compile.toml"


def init_project(
    directory: Path, *, force: bool = False, say: Callable[[str], None] = lambda _text: None
) -> list[Path]:
    """Write qualify.toml and stages/ into `directory`, the kernel check fitted to what the
    engine's build (or its sources) hold, and add runs/ and nix's result links to its .gitignore;
    refuse to overwrite qualify.toml or stages/ unless `force`. `say` is told where it looks
    (before nix, which may take a while), what it found, and what kernel check it wrote."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / CONFIG_NAME
    stages = directory / "stages"
    for path in (config, stages):
        if path.exists() and not force:
            raise UsageError(f"{path} already exists", "pass --force to overwrite it")
    say("looking at the engine's build and sources…")
    engine = detect(directory)
    for note in engine.notes:
        say(note)
    config.write_text(TEMPLATE, encoding="utf-8")
    if stages.exists():
        shutil.rmtree(stages)
    shutil.copytree(default_plan_dir(), stages)
    compile_stage = stages / COMPILE_STAGE
    text = (
        fit_kernel_check(compile_stage.read_text(encoding="utf-8"), engine)
        if compile_stage.is_file()
        else None
    )
    if text is not None:
        compile_stage.write_text(text, encoding="utf-8")
        say(f"{engine.found}: wrote {engine.check_words()} into {compile_stage}")
    else:
        say(f"{engine.found}, but the default plan has no kernel-resources check to write it into")
    for line in fit_stages(stages, engine.tools, engine.ctest):
        say(line)
    written = [config, stages]
    if ignore_runs(directory / ".gitignore"):
        written.append(directory / ".gitignore")
    return written


def fit_kernel_check(text: str, engine: EngineKind) -> str | None:
    """The stage file `text` with its `kernel-resources` check written for `engine`: a comment
    above it saying what was found and which parameter to edit, and `require` or
    `host_patterns` set; None when the stage holds no such check."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "[[check]]"]
    for start in starts:
        end = next((j for j in range(start + 1, len(lines)) if lines[j].lstrip().startswith("[")), len(lines))
        if not any(_KERNEL_CHECK.match(line) for line in lines[start:end]):
            continue
        # The keys written here replace any the default plan may set itself.
        block = [line for line in lines[start:end] if not _WRITTEN_KEY.match(line)]
        keys = len(block)
        # Blank lines and comments at the end belong to the next table: they stay after the keys.
        while keys and (not block[keys - 1].strip() or block[keys - 1].lstrip().startswith("#")):
            keys -= 1
        fitted = [*block[:keys], *_params(engine), *block[keys:]]
        done = [*lines[:start], *_comment(engine), *fitted, *lines[end:]]
        return "\n".join(done).rstrip("\n") + "\n"
    return None


_KERNEL_CHECK = re.compile(r'^\s*kind\s*=\s*"kernel-resources"\s*(#.*)?$')
_WRITTEN_KEY = re.compile(r"^\s*(host_patterns|require)\s*=")


def _params(engine: EngineKind) -> list[str]:
    if engine.require:
        return [f"require = {toml_strings(engine.require)}"]
    if engine.host_patterns is not None:
        return [f"host_patterns = {toml_strings(engine.host_patterns)}"]
    return []


def _comment(engine: EngineKind) -> list[str]:
    """Why the check is written as it is (what `init` found), then what to edit."""
    found = f"`qualify init` looked at the engine: {engine.found}."
    if engine.require:
        edit = (
            f"require = {toml_strings(engine.require)} fails a build that silently lost its GPU code; "
            "`paths` (globs under the out path) narrows the files read."
        )
        if "cuda" in engine.require:
            edit += " `ptxas_logs` names saved `ptxas -v` outputs, for CUDA spill bytes."
    elif engine.either:
        choices = " or ".join(toml_strings([f]) for f in engine.either)
        kinds = " and ".join(family_words(f) for f in engine.either)
        edit = (
            f"The sources hold both {kinds} code: set `require` to the family the build compiles "
            f"(require = {choices}), so that a build that silently lost its GPU code fails."
        )
    else:
        edit = (
            "Edit host_patterns: the globs naming the engine's kernel functions (a C++ function "
            "matches by its mangled or its bare name); `qualify kernels PATH --host-pattern '*'` "
            "lists every function of a build. "
            + {
                "ggml": "These are ggml's kernel names, which the build's functions match.",
                "guessed": "These were guessed from the prefixes, suffixes or words the build's "
                "exported functions share: keep the ones naming kernels.",
                "default": "These are ggml's (llama.cpp's) kernel names: replace them with the "
                'engine\'s, or the check fails with "no kernels found".',
            }[engine.patterns]
        )
    return [*_wrapped(found), "#", *_wrapped(edit)]


def _wrapped(text: str) -> list[str]:
    # Paths are never broken: a store path stays whole, to be copied.
    return textwrap.wrap(
        text, 98, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False, break_long_words=False
    )


def ignore_runs(gitignore: Path) -> bool:
    """Add the lines of `IGNORED` that `gitignore` lacks (kept as it is otherwise); whether it
    changed."""
    text = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    present = {line.strip() for line in text.splitlines()}
    missing = [line for line in IGNORED if line not in present and "/" + line not in present]
    if not missing:
        return False
    lead = "" if not text or text.endswith("\n") else "\n"
    block = (
        "# qualify's runs (reports, logs, measurements), nix build's links, and the distribution\n"
        "# stage's cache and signing key: not sources\n"
    )
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
    steps.append(f"edit {directory / CONFIG_NAME}: the arms' installables and the variables (model, corpus)")
    # The skeletons `init` wrote where the build lacks llama.cpp's programs (`qualify.stagefit`).
    for stage in sorted((directory / "stages").glob("*.toml")):
        if SKELETON in stage.read_text(encoding="utf-8"):
            steps.append(f"edit {stage}: its run line names {SKELETON}…, the engine's own program to run")
    key = directory / ".qualify" / "cache-key.sec"
    if not key.is_file():
        # The default plan's distribution stage signs its binary cache with it (docs/distribution.md).
        name = re.sub(r"[^A-Za-z0-9-]", "-", directory.resolve().name) or "engine"
        steps.append(
            f"mkdir -p {key.parent} && "
            f"(umask 077 && nix key generate-secret --key-name {name}-cache-1 > {key})"
            "    # the binary cache's signing key (stages/70-distribution.toml)"
        )
    steps += [
        f"qualify doctor{where}    # nix with flakes, the flake, the arms, the data files, the GPU",
        f"qualify plan{where}      # the stages and checks as they will run",
        # A flake sees only tracked files, and the arms are built from a committed tree.
        f"git{git} add flake.nix {CONFIG_NAME} stages .gitignore && git{git} commit",
        f"qualify run{where}       # qualifies qualify.toml's candidate",
    ]
    return steps
