"""Every command template of a plan checked against the placeholders it can be given, before
anything runs: a typo (`{modle}`) is a usage error naming the stage file, the check and the
key, not a check ERROR after a long build. So is `{port}` where no server is started: qualify
fills it only in the server template of a kind that starts one (`PORT_PARAMS`), and a variable
that uses it can only be used there."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from qualify.checks.registry import kind_named
from qualify.core.config import ProjectConfig
from qualify.core.errors import ConfigError, PlaceholderError
from qualify.core.placeholders import BUILTINS, expand, placeholders_in, split
from qualify.core.tomlfile import KeyPath, locate, read_toml, suggest
from qualify.pipeline.plan import Plan

if TYPE_CHECKING:
    from qualify.core.context import RoleArm


def _templates(value: object) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        yield from (v for v in value if isinstance(v, str))


#: (kind, parameter): the templates qualify fills `{port}` in, each the command that starts a
#: server on a free port of its own choosing.
PORT_PARAMS = frozenset({("openai-suite", "server"), ("soak", "server")})
#: (kind, parameter, format): a template that starts a server only in one format of its kind
#: (the bench's `run` under `format = "llama-server"`).
PORT_PARAMS_IN_FORMAT = frozenset({("bench", "run", "llama-server")})


def _starts_server(kind: str, param: str, fmt: object) -> bool:
    """Whether qualify fills `{port}` in this template (it starts the server itself)."""
    return (kind, param) in PORT_PARAMS or (kind, param, fmt) in PORT_PARAMS_IN_FORMAT


def _uses_port(value: object) -> bool:
    return any("port" in _names(template) for template in _templates(value))


def _names(template: str) -> set[str]:
    try:
        return placeholders_in(template)
    except PlaceholderError:
        return set()  # an unsplittable template: `_check` says so


def _port_variables(*tables: Mapping[str, object]) -> set[str]:
    """The variables whose values use `{port}` (they inherit its rule)."""
    return {name for table in tables for name, value in table.items() if _uses_port(value)}


def check_templates(plan: Plan, config: ProjectConfig, arms: Mapping[str, RoleArm] | None = None) -> None:
    """Raise ConfigError for the first template naming a placeholder no role can fill.

    Known: the built-ins, the project's variables, the check's, and those of the arms bound to
    the check's roles (of every arm when `arms` is not known yet, as in `qualify plan`)."""
    for name, value in config.vars.items():
        with _at_line(config.path, ("vars", name)):
            _check(value, set(BUILTINS), f"{config.path}: vars.{name}")
    arm_vars = {role: set(bound.arm.vars) for role, bound in (arms or {}).items()}
    every_arm = {v for arm in config.arms.values() for v in arm.vars}
    for stage in plan.stages:
        if stage.requires is not None:
            # Asked of the host before any role is bound: the project's variables only.
            with _at_line(stage.file, ("requires",)):
                known = {"project", "run_dir"} | set(config.vars)
                _check(stage.requires, known, f"{stage.file}: requires")
                try:  # filled as it will be when asked, so a stray brace is found now
                    expand(stage.requires, {**config.vars, "project": "p", "run_dir": "r"})
                except PlaceholderError as exc:
                    raise ConfigError(f"{stage.file}: requires: {exc.message}", exc.hint) from None
        for index, spec in enumerate(stage.checks):
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
            arm_tables = [a.vars for a in config.arms.values()]
            port_vars = _port_variables(config.vars, spec.vars, *arm_tables)
            for param in kind.params:
                if param.type not in ("string", "strings"):
                    continue
                where = f"{stage.file}: check {spec.name!r}, {param.name}"
                with _at_line(stage.file, ("check", index, param.name)):
                    for template in _templates(spec.params.get(param.name)):
                        _check(template, known, where)
                        if not _starts_server(kind.name, param.name, spec.params.get("format")):
                            _no_port(template, port_vars, where)


@contextmanager
def _at_line(file: Path, key: KeyPath) -> Iterator[None]:
    """A refusal naming `file` names the line of `key` in it too (found only when refusing:
    a plan that loads is not read twice)."""
    try:
        yield
    except ConfigError as exc:
        prefix = f"{file}: "
        if not exc.message.startswith(prefix):
            raise
        try:
            line = locate(read_toml(file).text, key)
        except ConfigError:
            line = None
        if line is None:
            raise
        raise ConfigError(f"{file}:{line}: {exc.message.removeprefix(prefix)}", exc.hint) from None


def _no_port(template: str, port_vars: set[str], where: str) -> None:
    """`{port}` (or a variable made with it) in a template that starts no server."""
    used = _names(template)
    via = sorted(used & port_vars)
    if "port" not in used and not via:
        return
    what = "{port}" if "port" in used else f"{{{via[0]}}}, a variable made with {{port}},"
    servers = ", ".join(f"{kind}'s `{param}`" for kind, param in sorted(PORT_PARAMS))
    servers += "".join(f", {k}'s `{p}` with format = {f!r}" for k, p, f in sorted(PORT_PARAMS_IN_FORMAT))
    raise ConfigError(
        f"{where}: {what} is used in {template!r}, but this template starts no server and is given no port",
        f"{{port}} is filled only in a server template ({servers}); give a fixed port here, or "
        "move the command into a check that starts the server",
    )


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
