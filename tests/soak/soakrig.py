"""Running a soak check in a test: a CheckContext over given roles, parameters from the kind's
defaults with the test's overrides, then measure and judge as the stage runner would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qualify.checks.base import Judgement, SavedCheck
from qualify.core.checkspec import CheckSpec
from qualify.core.config import ArmSpec, ProjectConfig
from qualify.core.context import CheckContext, RoleArm
from qualify.soak import check, kind


def soak_spec(params: dict[str, Any], limits: dict[str, float], roles: tuple[str, ...]) -> CheckSpec:
    full = {p.name: p.default for p in kind.KIND.params}
    full.update(params)
    return CheckSpec("soak", "soak", full, limits, roles)


def run_soak(
    tmp: Path,
    arms: dict[str, tuple[str | None, dict[str, Any]]],
    params: dict[str, Any],
    limits: dict[str, float],
    project_vars: dict[str, Any] | None = None,
) -> tuple[Judgement, SavedCheck]:
    """Measure and judge a soak; `arms` maps role -> (out path, arm vars)."""
    config = ProjectConfig(
        path=tmp / "qualify.toml",
        root=tmp,
        flake=".",
        plan_dir=None,
        pinned="pinned",
        reference=None,
        runs_dir=tmp / "runs",
        arms={},
        vars=dict(project_vars or {}),
        inherit_env=(),
    )
    bound = {
        role: RoleArm(role, ArmSpec(f"{role}-arm", ".#default", vars=dict(v)), out=out)
        for role, (out, v) in arms.items()
    }
    spec = soak_spec(params, limits, tuple(arms))
    folder = tmp / "soak"
    ctx = CheckContext(
        spec=spec, folder=folder, run_dir=tmp, config=config, arms=bound, echo=lambda _line: None
    )
    check.measure(ctx)
    saved = SavedCheck(folder, spec, tuple(arms))
    return check.judge(saved), saved


def cmdline(entry: Path) -> str:
    """A /proc/PID entry's command line with spaces, or "" once the process is gone."""
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
