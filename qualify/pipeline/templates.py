"""Every command template of a plan checked against the placeholders it can be given, before
anything runs: a typo (`{modle}`) is a usage error naming the stage file, the check and the
key, not a check ERROR after a long build."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from qualify.checks.registry import kind_named
from qualify.core.config import ProjectConfig
from qualify.core.errors import ConfigError, PlaceholderError
from qualify.core.placeholders import BUILTINS, placeholders_in, split
from qualify.core.tomlfile import suggest
from qualify.pipeline.plan import Plan

if TYPE_CHECKING:
    from qualify.core.context import RoleArm


def _templates(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        yield from (v for v in value if isinstance(v, str))


def check_templates(plan: Plan, config: ProjectConfig, arms: Mapping[str, RoleArm] | None = None) -> None:
    """Raise ConfigError for the first template naming a placeholder no role can fill.

    Known: the built-ins, the project's variables, the check's, and those of the arms bound to
    the check's roles (of every arm when `arms` is not known yet, as in `qualify plan`)."""
    for name, value in config.vars.items():
        _check(value, set(BUILTINS), f"{config.path}: vars.{name}")
    arm_vars = {role: set(bound.arm.vars) for role, bound in (arms or {}).items()}
    every_arm = {v for arm in config.arms.values() for v in arm.vars}
    for stage in plan.stages:
        for spec in stage.checks:
            kind = kind_named(spec.kind, str(stage.file))
            roles = spec.roles if not kind.builds_arms else tuple(arm_vars)
            from_arms: set[str] = set()
            if arms is None:
                from_arms = every_arm
            else:
                # A variable must be there for every role the check measures.
                sets = [arm_vars[r] for r in roles if r in arm_vars]
                from_arms = set.intersection(*sets) if sets else set()
            known = set(BUILTINS) | set(config.vars) | set(spec.vars) | from_arms
            for param in kind.params:
                if param.type not in ("string", "strings"):
                    continue
                for template in _templates(spec.params.get(param.name)):
                    _check(template, known, f"{stage.file}: check {spec.name!r}, {param.name}")


def _check(value: object, known: set[str], where: str) -> None:
    for template in _templates(value):
        try:
            split(template)
        except PlaceholderError as exc:
            raise ConfigError(f"{where}: {exc.message}") from None
        for name in sorted(placeholders_in(template) - known):
            raise ConfigError(
                f"{where}: unknown placeholder {{{name}}} in {template!r}{suggest(name, sorted(known))}",
                "known placeholders: "
                + ", ".join(sorted(known))
                + "; define variables in [vars] or an arm's vars",
            )
