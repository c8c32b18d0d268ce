"""What is checked before a run starts anything slow: nix where the plan builds, the project's
flake.nix where it builds from a local flake, a clean tree where the arms are built from one,
and, for a rerun or a resume, the plan the run was made with. (Templates:
`qualify.pipeline.templates`.)"""

from __future__ import annotations

import importlib.util
import shutil
from typing import TYPE_CHECKING

from qualify.checks.registry import kind_named
from qualify.core.errors import ConfigError, QualifyError, UsageError
from qualify.core.tomlfile import read_toml
from qualify.core.verdicts import Verdict

if TYPE_CHECKING:
    # What only a run's checks read (git, the run records) is imported where they are made:
    # `qualify plan` checks the flake through this module, and reads no run.
    from qualify.core.config import ProjectConfig
    from qualify.core.runstore import RunDir
    from qualify.pipeline.plan import Plan
    from qualify.pipeline.planfiles import PlanChange, PlanFiles
    from qualify.records.run import RunRecord

#: The stages' libraries (pyproject.toml's `stages` extra) by the name they are imported as.
STAGE_LIBRARIES = {
    "numba": "numba",
    "scipy": "scipy",
    "msgpack": "msgpack",
    "pyelftools": "elftools",
    "zstandard": "zstandard",
    "lz4": "lz4",
    "httpx": "httpx",
    "jsonschema": "jsonschema",
}


def require_stage_libraries() -> None:
    """A run measures with the `stages` extra's libraries; an install of the core alone (enough
    to show, report and merge) is told so before the run starts, not by an import error in a
    stage."""
    missing = [name for name, module in STAGE_LIBRARIES.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise UsageError(
            f"qualify run needs the stages' libraries, and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed",
            "pip install 'qualify[stages]' (the core alone shows, reports and merges runs)",
        )


def builds_arms(plan: Plan) -> list[str]:
    """The plan's checks that build the arms with nix, as `stage/check`."""
    return [
        f"{s.name}/{c.name}" for s in plan.stages for c in s.checks if kind_named(c.kind, c.name).builds_arms
    ]


def require_nix(plan: Plan) -> None:
    """A plan that builds arms cannot start without nix: say so before any stage runs."""
    builders = builds_arms(plan)
    if builders and shutil.which("nix") is None:
        raise QualifyError(
            f"nix is not installed, and the plan's {', '.join(builders)} builds the arms with it",
            "install nix (Debian: apt-get install nix-bin; elsewhere: https://nixos.org/download)",
        )


def require_flake(plan: Plan, config: ProjectConfig) -> None:
    """A plan that builds the arms from the project's own flake (`flake = "."`, or a folder)
    needs its flake.nix: refused now (exit 4), not as a build ERROR once the run has started."""
    if ":" in config.flake:
        return  # a flake reference (github:, git+https:, path:): nix resolves it
    builders = builds_arms(plan)
    root = (config.root / config.flake).resolve()
    if not builders or (root / "flake.nix").is_file():
        return
    doc = read_toml(config.path)
    where = doc.where(("flake",)) if "flake" in doc.data else str(config.path)
    raise ConfigError(
        f"{where}: the flake {root} has no flake.nix, and the plan's {', '.join(builders)} builds "
        "the arms from it",
        "write the project's flake.nix with an output for each arm's installable (e.g. "
        'packages.<system>.default for ".#default"), or point `flake` at one, e.g. '
        'flake = "github:owner/engine"',
    )


def require_host(plan: Plan, config: ProjectConfig, selected: set[str] | None) -> None:
    """What a check about to run needs of this host (a signing key, a cache's folder: each kind's
    `preflight`), refused now (exit 4) naming the stage file and the check, not as an ERROR once
    the stages before it have run for hours. `selected`: the stages this invocation runs (None:
    every stage of the plan)."""
    problems = [
        f"{stage.file}: check {spec.name!r}: {problem}"
        for stage in plan.stages
        if selected is None or stage.name in selected
        for spec in stage.checks
        if (problem := kind_named(spec.kind, spec.name).preflight(spec, config)) is not None
    ]
    if problems:
        raise ConfigError(
            "; ".join(problems),
            "fix it before the run starts (`qualify kinds` describes each check's parameters)",
        )


def will_build(run: RunDir | None, plan: Plan, selected: set[str] | None) -> bool:
    """Whether this invocation may run a stage that builds the arms."""
    from qualify.pipeline.stagerun import stage_outcome

    builders = [s for s in plan.stages if any(kind_named(c.kind, c.name).builds_arms for c in s.checks)]
    if run is None:
        return bool(builders)
    if selected is not None:
        return any(s.name in selected for s in builders)
    return any(not isinstance(stage_outcome(run, s), Verdict) for s in builders)


def require_clean_tree(config: ProjectConfig, allow_dirty: bool) -> None:
    """Arms built from a local flake with uncommitted changes would come from no one revision:
    refuse it now (exit 4) unless --allow-dirty, not as a build ERROR after the work started."""
    from qualify.core.gitstatus import listed, tree_changes

    if allow_dirty or ":" in config.flake:
        return
    root = (config.root / config.flake).resolve()
    # Nix builds the tracked files as they are in the tree: a change to one is a build from no
    # revision. Untracked files are not in the flake's source, so they do not count.
    changes = tree_changes(root)
    if changes is not None and changes.dirty:
        raise UsageError(
            f"the source tree {root} has uncommitted changes to tracked files "
            f"({listed(changes.changed, changes.changed_count)}): the arms would not come from one revision",
            "commit them, or pass --allow-dirty to build from the working tree anyway",
        )


def require_recorded_plan(saved: RunRecord, now: PlanFiles, config: ProjectConfig, allow_dirty: bool) -> None:
    """A rerun or a resume reads the plan from the working tree. Where that plan differs from
    the files the run was made with, its stages would be judged by limits the run's recorded
    revision never had, and shown under that revision: refused now (exit 4), naming the files,
    unless --allow-dirty, with which each stage it runs records the plan it ran under.

    A run made before qualify kept its plan's files has nothing to compare with: it goes on,
    and its stages record their plan (`planfiles.PlanStamp`, with no changes known)."""
    if allow_dirty or saved.plan_files is None:
        return
    changes = now.changes_from(saved.plan_files.files)
    if not changes:
        return
    git = saved.git
    made = f"the plan of git {git.rev[:12]}" if git.rev else "its plan as it was then"
    if git.rev and git.dirty:
        made += " with uncommitted changes"
    raise UsageError(
        f"run {saved.run.run_id} was made with {made}, and the working tree's plan differs from it: "
        f"{'; '.join(_where_changed(changes, config))}. Its stages would be judged by a plan the "
        "run's revision never had, and shown under that revision",
        f"{_restore(changes, git.rev if not git.dirty else None)}; or start a new run for the changed "
        "plan (leave out --run, --only and --from); or pass --allow-dirty to rerun under it: each "
        "stage it runs records the plan it ran under, and the report says so",
    )


def _where_changed(changes: list[PlanChange], config: ProjectConfig) -> list[str]:
    """Each change, with whether it is still uncommitted in the working tree (a git checkout's)."""
    from qualify.core.gitstatus import uncommitted
    from qualify.pipeline.planfiles import BUILTIN

    edited = uncommitted(config.root, [c.name for c in changes if not c.name.startswith(BUILTIN)])
    out = []
    for change in changes:
        if change.name.startswith(BUILTIN):
            out.append(f"{change} (qualify's own plan, of another qualify)")
        elif edited is not None:
            out.append(f"{change} ({'uncommitted' if change.name in edited else 'committed'})")
        else:
            out.append(str(change))
    return out


def _restore(changes: list[PlanChange], revision: str | None) -> str:
    """How to put the plan back as the run recorded it: the recorded revision, or its plan's
    files alone, where the run was made from a clean checkout; qualify's own plan from the
    qualify the run was made with."""
    from qualify.pipeline.planfiles import BUILTIN

    own = [c for c in changes if c.name.startswith(BUILTIN)]
    project = [c for c in changes if c not in own]
    steps = ["run the qualify the run was made with"] if own else []
    if project and revision is None:
        steps.append("put the plan's files back as they were when the run was made")
    elif project and revision is not None:
        kept = [c.name for c in project if c.how != "added"]
        added = [c.name for c in project if c.how == "added"]
        alone = [f"git checkout {revision[:12]} -- {' '.join(kept)}"] if kept else []
        alone += [f"move {', '.join(added)} out of the plan"] if added else []
        steps.append(
            f"check out the run's revision (git checkout {revision[:12]}), or its plan's files alone "
            f"and commit nothing ({'; '.join(alone)})"
        )
    return "; ".join(steps)
