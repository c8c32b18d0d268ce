"""What is checked before a run starts anything slow: nix where the plan builds, a clean tree
where the arms are built from a local flake. (Templates: `qualify.pipeline.templates`.)"""

from __future__ import annotations

import shutil

from qualify.checks.registry import kind_named
from qualify.core.config import ProjectConfig
from qualify.core.errors import QualifyError, UsageError
from qualify.core.process import capture
from qualify.core.runstore import RunDir
from qualify.core.verdicts import Verdict
from qualify.pipeline.plan import Plan
from qualify.pipeline.stagerun import stage_outcome


def require_nix(plan: Plan) -> None:
    """A plan that builds arms cannot start without nix: say so before any stage runs."""
    builders = [
        f"{s.name}/{c.name}" for s in plan.stages for c in s.checks if kind_named(c.kind, c.name).builds_arms
    ]
    if builders and shutil.which("nix") is None:
        raise QualifyError(
            f"nix is not installed, and the plan's {', '.join(builders)} builds the arms with it",
            "install nix (Debian: apt-get install nix-bin; elsewhere: https://nixos.org/download)",
        )


def will_build(run: RunDir | None, plan: Plan, selected: set[str] | None) -> bool:
    """Whether this invocation may run a stage that builds the arms."""
    builders = [s for s in plan.stages if any(kind_named(c.kind, c.name).builds_arms for c in s.checks)]
    if run is None:
        return bool(builders)
    if selected is not None:
        return any(s.name in selected for s in builders)
    return any(not isinstance(stage_outcome(run, s), Verdict) for s in builders)


def require_clean_tree(config: ProjectConfig, allow_dirty: bool) -> None:
    """Arms built from a local flake with uncommitted changes would come from no one revision:
    refuse it now (exit 4) unless --allow-dirty, not as a build ERROR after the work started."""
    if allow_dirty or ":" in config.flake:
        return
    root = (config.root / config.flake).resolve()
    # Nix counts changes to tracked files only: untracked files are not in the flake's source.
    argv = ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"]
    code, status = capture(argv, timeout_s=30)
    if code == 0 and status.strip():
        changed = [line[3:] for line in status.splitlines()][:5]
        raise UsageError(
            f"the source tree {root} has uncommitted changes ({', '.join(changed)}): the arms "
            "would not come from one revision",
            "commit them, or pass --allow-dirty to build from the working tree anyway",
        )
