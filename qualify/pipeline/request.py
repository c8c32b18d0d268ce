"""What `qualify run` is asked to do, what it returns, and the option parsing behind it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from qualify.checks.runoptions import RunOptions
from qualify.core.config import ProjectConfig
from qualify.core.errors import ExitCode, UsageError
from qualify.core.runstore import RunDir
from qualify.core.tomlfile import suggest
from qualify.core.verdicts import RunVerdict
from qualify.pipeline.plan import Plan, load_plan

#: The process groups a run started (a JSON line each), read back by the next attempt.
PROCESSES = "processes.jsonl"


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """What `qualify run` (or a bisect's step) asks of a run."""

    project: Path
    #: Every `--candidate` given (a run set when more than one, or when the project has controls).
    candidates: tuple[str, ...] = ()
    pinned: str | None = None
    profile: str | None = None
    run_id: str | None = None
    only: str | None = None
    from_stage: str | None = None
    force: bool = False
    no_gate: bool = False
    runs_dir: Path | None = None
    #: What the host's owners call it (a CI runner label, "strix-halo-3"), kept in provenance.
    host_label: str | None = None
    #: Run the project's `[controls]` with the candidates (`--no-controls` turns it off).
    controls: bool = True
    #: The options run.json records, with the values given: `--allow-dirty`, the candidate's
    #: input overrides, nix settings for every nix call of the build stage (remote builders,
    #: max-jobs), and the only stages of the plan to run, in its order (a bisect's step runs as
    #: far as its gate needs; the others are out of this run's plan, shown NOT CONFIGURED,
    #: never run), with those that leaves out (the runner fills them from the plan it narrows).
    options: RunOptions = field(default_factory=RunOptions)

    @property
    def candidate(self) -> str | None:
        """The one candidate asked for; None for none, or for several."""
        return self.candidates[0] if len(self.candidates) == 1 else None


@dataclass(frozen=True)
class RunOutcome:
    run: RunDir
    verdict: RunVerdict | None  # None when interrupted
    exit_code: ExitCode


def parse_overrides(values: list[str]) -> list[list[str]]:
    """`NAME=FLAKEREF` pairs from `--override-input`."""
    return _pairs(values, "--override-input", "NAME=FLAKEREF", "nixpkgs-rocm10=github:me/nixpkgs/rocm-10.1")


def parse_nix_options(values: list[str]) -> list[list[str]]:
    """`NAME=VALUE` pairs from `--nix-option` (the value may hold `=` and spaces)."""
    return _pairs(values, "--nix-option", "NAME=VALUE", "'builders=ssh-ng://gpu-builder x86_64-linux'")


def _pairs(values: list[str], flag: str, form: str, example: str) -> list[list[str]]:
    pairs = []
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise UsageError(f"{flag} {value!r}: expected {form}", f"for example {flag} {example}")
        pairs.append([name, rest])
    return pairs


def runs_dir_for(config: ProjectConfig, override: Path | None) -> Path:
    if override is not None:
        return override
    env = os.environ.get("QUALIFY_RUNS_DIR")
    return Path(env) if env else config.runs_dir


def narrowed(plan: Plan, stages: Sequence[str] | None) -> Plan:
    """`plan` with only the stages named (None: all of them); a name it lacks is a usage error."""
    if stages is None:
        return plan
    for name in stages:
        plan.stage(name)  # raises, naming the plan's stages
    return replace(plan, stages=tuple(s for s in plan.stages if s.name in stages))


def with_project_defaults(request: RunRequest, config: ProjectConfig) -> RunRequest:
    """A new run's request with qualify.toml's `candidate` and `profile` where the command line
    gives none (the command line wins). A resumed or rerun run keeps what it recorded: it is
    not asked here."""
    candidates = request.candidates or config.candidates
    return replace(
        request,
        candidates=candidates,
        profile=request.profile if request.profile is not None else config.profile,
    )


def load_run_plan(config: ProjectConfig, profile: str | None, *, from_config: bool) -> Plan:
    """The plan as `profile` resolves it. A profile taken from qualify.toml (`from_config`) that
    the plan does not define is an error naming qualify.toml's key: the file is what to change,
    not a command line nobody typed."""
    try:
        return load_plan(config.plan_dir, profile)
    except UsageError:
        if not from_config or profile is None:
            raise
        plan = load_plan(config.plan_dir)
        if profile in plan.profiles:
            raise
        defined = ", ".join(plan.profiles)
        raise config.key_error(
            "profile",
            f"names no profile {profile!r} of the plan in {plan.source}{suggest(profile, plan.profiles)}",
            f"profiles: {defined}" if defined else "the plan defines no profiles: leave the key out",
        ) from None
