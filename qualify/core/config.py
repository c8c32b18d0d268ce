"""`qualify.toml`: the project, its arms and variables, loaded into frozen dataclasses."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.core.errors import ConfigError, UsageError
from qualify.core.plaintext import describe, forbidden
from qualify.core.recordredaction import redact_argv, redact_env, redact_ref, redact_values
from qualify.core.redaction import remember_urls, token_in_name
from qualify.core.remedies import RemedySpec, load_remedies
from qualify.core.series import load_series
from qualify.core.tomlfile import Table, TomlDoc, read_toml, suggest

CONFIG_NAME = "qualify.toml"

#: Placeholders qualify fills itself; a variable may not shadow them.
BUILTIN_PLACEHOLDERS = (
    "out",
    "bin",
    "arm",
    "role",
    "dir",
    "out_file",
    "run_dir",
    "port",
    "installable",
    "devshell",
)

VarValue = str | int | float | bool | tuple[str, ...]

#: A host's label names its folder in a fleet report, its CI artifact and its job: letters,
#: digits, `.`, `_` and `-` are safe in all three.
HOST_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class ArmSpec:
    """A named build of the project: a flake installable plus how to run it."""

    name: str
    installable: str
    devshell: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    nix_args: tuple[str, ...] = ()
    vars: dict[str, VarValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Controls:
    """`[controls]`: arms run with every qualification to show the gates could tell.

    A positive control (the pinned arm as a candidate, an A/A) must pass every stage; a
    negative control must FAIL each stage named for it (a change the gate has to catch).
    """

    positive: tuple[str, ...] = ()
    negative: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.positive or self.negative)

    def as_json(self) -> dict[str, Any]:
        return {"positive": list(self.positive), "negative": {k: list(v) for k, v in self.negative.items()}}


@dataclass(frozen=True)
class ProjectConfig:
    """Everything `qualify.toml` says, resolved against the file's directory."""

    path: Path
    root: Path
    flake: str
    plan_dir: Path | None  # None: the built-in default plan
    pinned: str
    reference: str | None
    runs_dir: Path
    arms: dict[str, ArmSpec]
    vars: dict[str, VarValue]
    inherit_env: tuple[str, ...]
    controls: Controls = field(default_factory=Controls)
    #: `candidate`: what `qualify run` qualifies when no `--candidate` is given (so that a CI
    #: workflow runs unchanged on any project), and `profile`, the profile it then uses.
    candidates: tuple[str, ...] = ()
    profile: str | None = None
    #: `[series.NAME]`: ordered arms a bisect walks, known-good end first (`qualify.core.series`).
    series: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: `[hosts]`: each host's label and the labels of the CI runners it runs on, in order; the
    #: CI example's matrix (`examples/ci/github-actions.yml`). Empty: one job on the runner's own.
    hosts: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: `[remedies.NAME]`: variants `qualify remedy` tries on failing source files.
    remedies: dict[str, RemedySpec] = field(default_factory=dict)
    #: The file as read: a key checked later against something else (`profile` against the
    #: plan, when a run resolves it) is still named at its line.
    doc: TomlDoc | None = field(default=None, compare=False, repr=False)

    def key_error(self, key: str, message: str, hint: str | None = None) -> ConfigError:
        """An error naming this file, the top-level `key` and its line."""
        if self.doc is None:
            return ConfigError(f"{self.path}: {key}: {message}", hint)
        return self.doc.error((key,), message, hint)

    def arm(self, name: str, *, role: str) -> ArmSpec:
        if name not in self.arms:
            raise UsageError(
                f"{self.path}: no arm named {name!r} for the {role} role{suggest(name, self.arms)}",
                "arms defined: " + ", ".join(sorted(self.arms)),
            )
        return self.arms[name]

    def vars_for(self, arm: ArmSpec) -> dict[str, VarValue]:
        """Project variables overridden by the arm's own."""
        return {**self.vars, **arm.vars}

    def snapshot(self) -> dict[str, Any]:
        """The resolved configuration as saved in run.json (secrets redacted)."""
        return {
            "path": str(self.path),
            "flake": redact_ref(self.flake),
            "plan_dir": str(self.plan_dir) if self.plan_dir else None,
            "pinned": self.pinned,
            "reference": self.reference,
            "runs_dir": str(self.runs_dir),
            "inherit_env": list(self.inherit_env),
            "controls": self.controls.as_json(),
            "vars": redact_values(_jsonable(self.vars)),
            "arms": {
                name: {
                    "installable": redact_ref(arm.installable),
                    "devshell": redact_ref(arm.devshell),
                    "env": redact_env(arm.env),
                    "nix_args": redact_argv(arm.nix_args, known=False),
                    "vars": redact_values(_jsonable(arm.vars)),
                }
                for name, arm in self.arms.items()
            },
        }


def _jsonable(values: dict[str, VarValue]) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


def find_config(project: Path) -> Path:
    path = project / CONFIG_NAME if project.is_dir() else project
    if not path.is_file():
        raise ConfigError(
            f"{path}: no {CONFIG_NAME} here",
            "run `qualify init` in the project's directory, or pass --project DIR",
        )
    return path


def load_config(project: Path) -> ProjectConfig:
    """Load `qualify.toml` from a project directory (or the file itself)."""
    path = find_config(project).resolve()
    doc = read_toml(path)
    top = Table(doc, doc.data)
    top.reject_unknown(
        [
            "flake",
            "plan",
            "pinned",
            "reference",
            "runs_dir",
            "arms",
            "vars",
            "inherit_env",
            "controls",
            "candidate",
            "profile",
            "series",
            "hosts",
            "remedies",
        ]
    )
    root = path.parent
    arms_table = top.table("arms", required=True)
    for name in arms_table.data:
        _check_arm_name(arms_table, name)
    arms = {name: _load_arm(arms_table, name) for name in arms_table.data}
    if not arms:
        raise arms_table.error(None, "no arms defined", "add [arms.pinned] and a candidate arm")

    pinned = top.string("pinned") or ("pinned" if "pinned" in arms else None)
    if pinned is None:
        raise top.error(
            None,
            'no pinned arm: name one with `pinned = "<arm>"` or define [arms.pinned]',
        )
    if pinned not in arms:
        raise top.error("pinned", f"names no arm {pinned!r}{suggest(pinned, arms)}")
    reference = top.string("reference") or ("reference" if "reference" in arms else None)
    if reference is not None and reference not in arms:
        raise top.error("reference", f"names no arm {reference!r}{suggest(reference, arms)}")

    plan = top.string("plan")
    plan_dir = (root / plan).resolve() if plan else None
    if plan_dir is not None and not plan_dir.is_dir():
        raise top.error("plan", f"{plan_dir} is not a directory of stage files")
    runs_dir = Path(top.string("runs_dir", "runs") or "runs")
    flake = top.string("flake", ".") or "."
    # A token in a flake URL reaches nix as written, and nix or git may print it anywhere.
    remember_urls([flake, *(t for a in arms.values() for t in (a.installable, a.devshell, *a.nix_args))])
    return ProjectConfig(
        path=path,
        root=root,
        flake=flake,
        plan_dir=plan_dir,
        pinned=pinned,
        reference=reference,
        runs_dir=runs_dir if runs_dir.is_absolute() else root / runs_dir,
        arms=arms,
        vars=load_vars(top.table("vars")),
        inherit_env=top.strings("inherit_env"),
        controls=_load_controls(top.table("controls"), arms),
        candidates=_load_candidates(top, arms, pinned),
        profile=_load_profile(top),
        series=load_series(top.table("series"), arms),
        hosts=_load_hosts(top.table("hosts")),
        remedies=load_remedies(top.table("remedies"), frozenset(arms)),
        doc=doc,
    )


def _load_candidates(top: Table, arms: dict[str, ArmSpec], pinned: str) -> tuple[str, ...]:
    """`candidate`: an arm's name or a list of them, each an arm other than the pinned one (the
    profiles a plan defines are checked when a run resolves its request: the plan is read then)."""
    if "candidate" not in top.data:
        return ()
    value = top.data["candidate"]
    if isinstance(value, str):
        names: tuple[str, ...] = (value,)
        keys = [top.key("candidate")]
    elif isinstance(value, list):
        names = top.strings("candidate")
        keys = [(*top.key("candidate"), index) for index in range(len(names))]
    else:
        got = {bool: "a boolean", int: "a number", float: "a number", dict: "a table"}.get(
            type(value), "another type"
        )
        raise top.error(
            "candidate",
            f"expected an arm's name or a list of them, got {got}",
            'for example candidate = "rocm10"',
        )
    if not names:
        raise top.error("candidate", "names no arm", 'name the arm to qualify: candidate = "ARM"')
    others = sorted(set(arms) - {pinned})  # what a candidate may name
    for key, name in zip(keys, names, strict=True):
        if name not in arms:
            raise top.doc.error(
                key,
                f"names no arm {name!r}{suggest(name, others)}",
                "arms a candidate may name: " + (", ".join(others) or "none besides the pinned arm: add one"),
            )
        if name == pinned:
            # The pinned arm as the candidate is an A/A run: a control, asked for as one.
            raise top.doc.error(
                key,
                f"{name!r} is the pinned arm, the one every candidate is compared with",
                "name the arm to qualify; to run the pinned arm against itself on every run, "
                f'declare it a control: [controls] positive = ["{name}"]',
            )
    if len(set(names)) != len(names):
        raise top.error("candidate", "names an arm twice")
    return names


def _load_hosts(table: Table) -> dict[str, tuple[str, ...]]:
    """`[hosts]`: `LABEL = ["runner", "labels"]`, read by the CI workflow as its matrix; checked
    here so that `qualify doctor` names a wrong entry before a job is queued on no runner."""
    hosts: dict[str, tuple[str, ...]] = {}
    for label in table.data:
        if not HOST_LABEL.fullmatch(label):
            raise table.error(
                label,
                f"the host label {label!r} cannot name a folder of a fleet report and a CI artifact",
                "use letters, digits, '.', '_' and '-' (64 at most), starting with a letter or digit",
            )
        runners = table.strings(label)
        if not runners or not all(r.strip() for r in runners):
            raise table.error(
                label,
                "expected the labels of the runners this host's job runs on",
                f'for example {label} = ["self-hosted", "{label}"]',
            )
        for index, runner in enumerate(runners):
            char = forbidden(runner)
            if char is not None:
                raise table.doc.error((*table.key(label), index), f"the runner label holds {describe(char)}")
        hosts[label] = runners
    return hosts


def _load_profile(top: Table) -> str | None:
    profile = top.string("profile")
    if profile is not None and not profile.strip():
        raise top.error("profile", "is empty", "name one of the plan's profiles, or leave the key out")
    return profile


def _load_controls(table: Table, arms: dict[str, ArmSpec]) -> Controls:
    """`[controls]`, with every arm named checked here (stage names are checked against the
    plan when a run binds its members)."""
    table.reject_unknown(["positive", "negative"])
    positive = table.strings("positive")
    for index, name in enumerate(positive):
        if name not in arms:
            raise table.doc.error(
                (*table.key("positive"), index),
                f"names no arm {name!r}{suggest(name, arms)}",
                "arms defined: " + ", ".join(sorted(arms)),
            )
    if len(set(positive)) != len(positive):
        raise table.error("positive", "names an arm twice")
    negative_table = table.table("negative")
    negative: dict[str, tuple[str, ...]] = {}
    for name in negative_table.data:
        if name not in arms:
            raise negative_table.error(
                name,
                f"names no arm {name!r}{suggest(name, arms)}",
                "arms defined: " + ", ".join(sorted(arms)),
            )
        stages = negative_table.strings(name)
        if not stages:
            raise negative_table.error(
                name,
                "a negative control needs the stages it must fail",
                f'for example {name} = ["numerics"]',
            )
        negative[name] = stages
    return Controls(positive, negative)


def _check_arm_name(arms: Table, name: str) -> None:
    """An arm's name is shown in every report and names folders and CI annotations: a character
    that reorders or hides text around it (bidirectional, zero-width) or a control character
    would make what a reviewer reads differ from what ran."""
    char = forbidden(name)
    if char is not None:
        raise arms.error(
            name,
            f"the arm's name holds {describe(char)}, a character that changes how text is shown",
            "rename the arm ([arms.NAME]) with visible characters only",
        )
    # A name is kept in clear in every record, report and annotation: one shaped like an access
    # token is refused, and named here with the token hidden.
    shown = token_in_name(name)
    if shown is not None:
        where = arms.doc.where(arms.key(name)).replace(name, shown)
        raise ConfigError(
            f"{where}: the arm's name has the form of an access token",
            "rename the arm ([arms.NAME]); if that is a real token, revoke it: it is in this file",
        )


def _load_arm(arms: Table, name: str) -> ArmSpec:
    table = arms.table(name)
    table.reject_unknown(["installable", "devshell", "env", "nix_args", "vars"])
    installable = table.string("installable", required=True)
    assert installable is not None
    return ArmSpec(
        name=name,
        installable=installable,
        devshell=table.string("devshell"),
        env=table.string_map("env"),
        nix_args=table.strings("nix_args"),
        vars=load_vars(table.table("vars")),
    )


def load_vars(table: Table) -> dict[str, VarValue]:
    out: dict[str, VarValue] = {}
    for name, value in table.data.items():
        if name in BUILTIN_PLACEHOLDERS:
            raise table.error(
                name,
                f"{name!r} is a placeholder qualify fills itself and cannot be a variable",
                "rename the variable",
            )
        if isinstance(value, list):
            if not all(isinstance(item, str) for item in value):
                raise table.error(name, "expected a list of strings")
            out[name] = tuple(value)
        elif isinstance(value, float) and not math.isfinite(value):
            # A variable fills a command (`--temp {temp}`): "nan" or "inf" there is no number.
            raise table.error(name, f"{name} = {value!r}: expected a finite number")
        elif isinstance(value, (str, int, float, bool)):
            out[name] = value
        else:
            raise table.error(name, "expected a string, number, boolean or list of strings")
    return out
