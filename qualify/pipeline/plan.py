"""The plan: ordered stages read from `stages/*.toml`, each a group of checks with one gate;
`plan_text` writes it out as `qualify plan` shows it.

Every number is checked against the range its kind declares (`qualify.checks.base.Param`,
`Limit`) as the plan is read, profiles included, so a NaN limit or a level of 2 is a usage error
naming the file, the line and the range before anything runs. Loading is linear in the number of
checks: each stage file is read once and every lookup by name is a dict's.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qualify.checks.base import ROLES, TIMEOUT, CheckKind, Param
from qualify.checks.registry import installed, kind_named
from qualify.core.checkspec import CheckSpec
from qualify.core.config import load_vars
from qualify.core.errors import ConfigError, UsageError
from qualify.core.redaction import token_in_name
from qualify.core.resources import data_dir
from qualify.core.tomlfile import Table, read_toml, suggest
from qualify.pipeline.notapplicable import BUILD_STAGE, NOT_MEASURING, NotApplicable, not_applicable

#: The default stage order; a stage of it that a plan leaves out is NOT CONFIGURED.
DEFAULT_ORDER = ("build", "compile", "numerics", "serving", "soak", "bench", "distribution")

_CHECK_COMMON = ("kind", "name", "description", "timeout", "env", "roles", "limits", "vars")
_STAGE_KEYS = ("name", "description", "inconclusive", "requires", "check", "profiles", "not_applicable")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_LIMIT = re.compile(r"^(max|min)_[a-z0-9_]+$|^[a-z0-9_]+_margin$")


@dataclass(frozen=True)
class StageSpec:
    name: str
    folder: str  # the stage file's stem, e.g. "20-compile"; names the stage's run folder
    file: Path
    checks: tuple[CheckSpec, ...]
    inconclusive: str = "fail"
    description: str = ""
    #: A command that says whether this host can run the stage at all (an AMD GPU of the
    #: targets, a driver): exit 0 runs it; any other exit makes each check SKIPPED, with the
    #: command's own words as the reason. None: every host can.
    requires: str | None = None

    @property
    def inconclusive_as_warn(self) -> bool:
        return self.inconclusive == "warn"

    def as_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "name": self.name,
            "folder": self.folder,
            "file": str(self.file),
            "inconclusive": self.inconclusive,
            "description": self.description,
            "checks": [c.as_json() for c in self.checks],
        }
        if self.requires is not None:
            document["requires"] = self.requires
        return document


@dataclass(frozen=True)
class Plan:
    source: Path
    builtin: bool
    stages: tuple[StageSpec, ...]
    profile: str | None = None
    profiles: tuple[str, ...] = ()
    not_applicable: tuple[NotApplicable, ...] = ()

    def stage(self, name: str) -> StageSpec:
        for stage in self.stages:
            if stage.name == name:
                return stage
        names = [s.name for s in self.stages]
        raise UsageError(
            f"the plan has no stage {name!r}{suggest(name, names)}",
            "stages in this plan: " + ", ".join(names),
        )

    def not_configured(self) -> tuple[str, ...]:
        present = {s.name for s in self.stages} | {n.name for n in self.not_applicable}
        return tuple(name for name in DEFAULT_ORDER if name not in present)

    def never_qualifies(self) -> list[str]:
        """Why no run of this plan can ever be QUALIFIED, whatever it measures (empty: it can)."""
        why = []
        missing = self.not_configured()
        if missing:
            # The build stage applies to every engine: it can only be added.
            declarable = [n for n in missing if n != BUILD_STAGE]
            how = "add a stage file for " + ("it" if len(missing) == 1 else "each")
            if declarable:
                which = "it" if len(declarable) == 1 else "those that do not apply to the engine"
                how += (
                    f", or declare {which} not applicable "
                    f'(a stage file holding name = "{declarable[0]}" and not_applicable = "why")'
                )
                if BUILD_STAGE in missing:
                    how += f"; the {BUILD_STAGE} stage applies to every engine"
            why.append(
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in the plan, and a "
                f"stage of the default order that is missing keeps every run INCOMPLETE: {how}"
            )
        if not any(s.name not in NOT_MEASURING for s in self.stages):
            why.append(
                "no stage but the build measures the engine: building (and distributing) is not "
                "qualifying, so a run stays INCOMPLETE; give the plan a stage with checks"
            )
        return why

    def roles_needed(self) -> tuple[str, ...]:
        needed = {role for stage in self.stages for check in stage.checks for role in check.roles}
        return tuple(role for role in ROLES if role in needed or role in ("pinned", "candidate"))

    def as_json(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "builtin": self.builtin,
            "profile": self.profile,
            "profiles": list(self.profiles),
            "stages": [s.as_json() for s in self.stages],
            "not_configured": list(self.not_configured()),
            "not_applicable": {n.name: n.reason for n in self.not_applicable},
        }


def default_plan_dir() -> Path:
    return data_dir("stages")


def load_plan(plan_dir: Path | None, profile: str | None = None) -> Plan:
    """Read every `*.toml` in `plan_dir` (or the built-in plan) in file-name order."""
    builtin = plan_dir is None
    source = default_plan_dir() if plan_dir is None else plan_dir
    files = sorted(source.glob("*.toml"))
    if not files:
        raise ConfigError(f"{source}: no stage files (*.toml) in the plan directory")
    stages: list[StageSpec] = []
    not_applicable: list[NotApplicable] = []
    overrides: dict[str, dict[str, StageSpec]] = {}  # profile -> stage name -> stage as resolved
    named: dict[str, Path] = {}  # every stage's name -> its file, run or not applicable
    for file in files:
        loaded = _load_stage(file)
        if loaded[0].name in named:
            raise ConfigError(
                f"{file}: a stage named {loaded[0].name!r} is already defined (in {named[loaded[0].name]})"
            )
        named[loaded[0].name] = file
        if isinstance(loaded[0], NotApplicable):
            not_applicable.append(loaded[0])
            continue
        stage, profiles = loaded
        stages.append(stage)
        for name, as_resolved in profiles.items():
            overrides.setdefault(name, {})[stage.name] = as_resolved
    plan = Plan(source, builtin, tuple(stages), None, tuple(sorted(overrides)), tuple(not_applicable))
    if profile is None:
        return plan
    if profile not in overrides:
        raise UsageError(
            f"the plan in {source} defines no profile {profile!r}{suggest(profile, overrides)}",
            ("profiles: " + ", ".join(sorted(overrides))) if overrides else "it defines no profiles",
        )
    resolved = tuple(overrides[profile].get(stage.name, stage) for stage in stages)
    return replace(plan, stages=resolved, profile=profile)


def _load_stage(
    file: Path,
) -> tuple[StageSpec, dict[str, StageSpec]] | tuple[NotApplicable, dict[str, StageSpec]]:
    """The stage, and the stage as each of its profiles resolves it (checked now, so a profile
    is refused at load like the plan, whichever profile the run picks); or the stage's
    declaration that it does not apply."""
    doc = read_toml(file)
    top = Table(doc, doc.data)
    top.reject_unknown(_STAGE_KEYS)
    stem_name = re.sub(r"^\d+[-_]", "", file.stem)
    name = top.string("name", stem_name) or stem_name
    if not _NAME.match(name):
        raise top.error("name", f"stage name {name!r} must be lower-case letters, digits, - or _")
    _not_a_token(top, name, "stage")
    if (shown := token_in_name(file.stem)) is not None:  # the stage's folder in every run
        raise ConfigError(
            f"{file.parent / shown}{file.suffix}: the stage file's name has the form of an access token",
            "rename the file; if that is a real token, revoke it",
        )
    if "not_applicable" in top.data:
        return not_applicable(top, name, file), {}
    inconclusive = top.string("inconclusive", "fail") or "fail"
    if inconclusive not in ("fail", "warn"):
        raise top.error("inconclusive", f'expected "fail" or "warn", got {inconclusive!r}')
    check_tables = top.tables("check")
    if not check_tables:
        raise top.error(None, "a stage needs at least one [[check]]")
    checks: dict[str, CheckSpec] = {}
    for table in check_tables:
        check = _load_check(table)
        if check.name in checks:
            raise table.error("name", f"a check named {check.name!r} is already in this stage")
        checks[check.name] = check
    profiles = top.table("profiles")
    stage = StageSpec(
        name=name,
        folder=file.stem,
        file=file,
        checks=tuple(checks.values()),
        inconclusive=inconclusive,
        description=top.string("description", "") or "",
        requires=top.string("requires") or None,
    )
    return stage, {p: _resolve_profile(stage, profiles.table(p)) for p in profiles.data}


def _not_a_token(table: Table, name: str, what: str) -> None:
    """A name shaped like an access token is refused: names are kept in clear in every record,
    report and annotation (a token pasted in the wrong place would be published)."""
    shown = token_in_name(name)
    if shown is not None:
        raise table.error(
            "name",
            f"the {what} name {shown!r} has the form of an access token",
            f"rename the {what}; if that is a real token, revoke it: it is in this file",
        )


def _load_check(table: Table) -> CheckSpec:
    kind_name = table.string("kind", required=True)
    assert kind_name is not None
    # The key's line is looked up only for the error: finding lines costs a pass over the file.
    known = next((k for k in installed() if k.name == kind_name), None)
    kind = known or kind_named(kind_name, table.doc.where(table.key("kind")))  # raises, naming kinds
    table.reject_unknown([*_CHECK_COMMON, *(p.name for p in kind.params)])
    name = table.string("name", kind.name) or kind.name
    if not _NAME.match(name):
        raise table.error("name", f"check name {name!r} must be lower-case letters, digits, - or _")
    _not_a_token(table, name, "check")
    spec = CheckSpec(
        name=name,
        kind=kind.name,
        params=_params(table, kind),
        limits=_limits(table.table("limits"), kind),
        roles=_roles(table, kind),
        timeout_s=_param_value(table, TIMEOUT),
        env=table.string_map("env"),
        description=table.string("description", "") or "",
        vars=load_vars(table.table("vars")),
    )
    problem = kind.invalid(spec)
    if problem is not None:
        raise table.error(None, f"check {name!r} ({kind.name}): {problem}")
    # A check that leaves pinned out must still judge the candidate; a kind says when it can't.
    why = None if "pinned" in spec.roles or kind.builds_arms else kind.needs_pinned(spec)
    if why is not None:
        raise table.error(
            "roles" if "roles" in table.data else None,
            f"check {name!r} ({kind.name}) leaves out the pinned role, but {why}",
            'add "pinned" to its roles, or give it limits it can judge the candidate by alone',
        )
    return spec


def _params(table: Table, kind: CheckKind) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for param in kind.params:
        if param.required and param.name not in table.data:
            raise table.error(None, f"check kind {kind.name!r} needs {param.name!r} ({param.help})")
        params[param.name] = _param_value(table, param)
    return params


def _param_value(table: Table, param: Param) -> Any:
    if param.name not in table.data:
        # None stays None: "not given" differs from "empty"; a list or table default is copied.
        default = param.default
        return copy.deepcopy(default) if isinstance(default, (list, dict)) else default
    try:
        return _READERS[param.type](table, param)
    except ConfigError as exc:
        raise _explained(exc, param.name, param.help) from None


def _explained(exc: ConfigError, name: str, help_text: str) -> ConfigError:
    """A value's error with what the value is for, as `qualify kinds` says it."""
    if exc.hint is None and help_text:
        exc.hint = f"{name}: {help_text}"
    return exc


_READERS: dict[str, Callable[[Table, Param], Any]] = {
    "string": lambda t, p: t.string(p.name),
    "number": lambda t, p: t.number(p.name, allowed=p.allowed),
    "integer": lambda t, p: t.integer(p.name, allowed=p.allowed),
    "boolean": lambda t, p: t.boolean(p.name, False),
    "strings": lambda t, p: list(t.strings(p.name)),
    "table": lambda t, p: _finite_table(t.table(p.name)),
}


def _finite_table(table: Table) -> dict[str, Any]:
    """A table parameter as it is (a request body, patterns), with no NaN or infinity in it:
    neither is a number JSON can carry or a comparison can use."""

    def walk(value: Any, key: tuple[str | int, ...]) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise table.doc.error(key, f"{value!r} is not a finite number")
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, (*key, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, (*key, i))

    walk(table.data, table.path)
    return dict(table.data)


def _limits(table: Table, kind: CheckKind) -> dict[str, float]:
    limits: dict[str, float] = {}
    for name in table.data:
        if not _LIMIT.match(name):
            raise table.error(name, f"limit {name!r} must be named max_*, min_* or *_margin")
        limit = kind.limit(name)
        if limit is None:
            names = kind.limit_names or ()
            raise table.error(
                name,
                f"check kind {kind.name!r} has no limit {name!r}{suggest(name, names)}",
                "its limits: " + (", ".join(names) or "none"),
            )
        try:
            value = table.number(name, allowed=limit.allowed)
        except ConfigError as exc:
            raise _explained(exc, name, limit.help) from None
        assert value is not None
        limits[name] = value
    return limits


def _roles(table: Table, kind: CheckKind) -> tuple[str, ...]:
    roles = table.strings("roles", kind.default_roles)
    for role in roles:
        if role not in ROLES:
            raise table.error("roles", f"unknown role {role!r}{suggest(role, ROLES)}")
    if "candidate" not in roles:
        raise table.error("roles", "a check must measure the candidate role")
    return tuple(r for r in ROLES if r in roles)


def _resolve_profile(stage: StageSpec, table: Table) -> StageSpec:
    table.reject_unknown(["inconclusive", "check"])
    inconclusive = table.string("inconclusive", stage.inconclusive) or stage.inconclusive
    if inconclusive not in ("fail", "warn"):
        raise table.error("inconclusive", 'expected "fail" or "warn"')
    checks = table.table("check")
    by_name = {c.name: c for c in stage.checks}
    for check_name in checks.data:
        spec = by_name.get(check_name)
        if spec is None:
            raise checks.error(
                check_name,
                f"stage {stage.name!r} has no check {check_name!r}{suggest(check_name, by_name)}",
            )
        override = checks.table(check_name)
        # The merged entry is read like a plan's, so a profile cannot smuggle in a wrong type or
        # a value out of range.
        by_name[check_name] = _load_check(Table(table.doc, _merge(spec, override), override.path))
    return replace(stage, checks=tuple(by_name.values()), inconclusive=inconclusive)


def _merge(spec: CheckSpec, override: Table) -> dict[str, Any]:
    """A check entry with a profile's overrides; limits and vars merge key by key."""
    merged = {**_raw(spec), **override.data}
    for name in ("limits", "vars"):
        if name in override.data:
            merged[name] = {**_raw(spec).get(name, {}), **override.table(name).data}
    return merged


def _raw(spec: CheckSpec) -> dict[str, Any]:
    raw: dict[str, Any] = {"kind": spec.kind, "name": spec.name, **copy.deepcopy(spec.params)}
    raw = {k: v for k, v in raw.items() if v is not None}
    raw["limits"] = dict(spec.limits)
    raw["roles"] = list(spec.roles)
    if spec.timeout_s is not None:
        raw["timeout"] = spec.timeout_s
    if spec.env:
        raw["env"] = dict(spec.env)
    if spec.description:
        raw["description"] = spec.description
    if spec.vars:
        raw["vars"] = {k: list(v) if isinstance(v, tuple) else v for k, v in spec.vars.items()}
    return raw
