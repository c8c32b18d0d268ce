"""What a check kind's `measure` gets: the roles' arms, a folder per role, the runner."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qualify.core import process
from qualify.core.checkspec import CheckSpec
from qualify.core.config import ArmSpec, ProjectConfig
from qualify.core.environment import child_env
from qualify.core.placeholders import Value, expand
from qualify.core.progress import Progress
from qualify.core.runstore import ensure_folder, write_json
from qualify.core.secretsources import remember_named


@dataclass(frozen=True)
class RoleArm:
    """An arm as it plays a role in this run, with what the build stage learned about it."""

    role: str
    arm: ArmSpec
    out: str | None = None  # the store path, once built
    drv: str | None = None


def _with_builtins(value: Value, builtins: Mapping[str, Value]) -> Value:
    """A variable's value with built-in placeholders filled (never other variables)."""
    if isinstance(value, str) and "{" in value:
        return expand([value], builtins)[0]  # built-ins are scalars: one argument in, one out
    if isinstance(value, (list, tuple)):
        return tuple(item for v in value for item in expand([v], builtins))
    return value


def abba_order(roles: Sequence[str], pairs: int) -> list[tuple[str, ...]]:
    """Interleave two roles in ABBA order: (A, B), (B, A), (A, B), ...

    Alternating which role goes first cancels a linear drift (thermal, caches) between them.
    """
    if len(roles) != 2:
        raise ValueError("ABBA interleaving takes exactly two roles")
    a, b = roles
    return [(a, b) if i % 2 == 0 else (b, a) for i in range(pairs)]


def rounds_order(roles: Sequence[str], rounds: int) -> list[tuple[str, ...]]:
    """Each round's order of `roles`: ABBA for two; for more, the order rotates by one each
    round (every role takes every position once in len(roles) rounds) and every other cycle
    runs backwards, so that a position's cost and a linear drift fall on every role alike."""
    n = len(roles)
    if n == 2:
        return abba_order(roles, rounds)
    if n < 2:
        raise ValueError("interleaving takes at least two roles")
    order = []
    for r in range(rounds):
        turn = r % n
        rotated = (*roles[turn:], *roles[:turn])
        order.append(rotated if (r // n) % 2 == 0 else tuple(reversed(rotated)))
    return order


@dataclass(frozen=True)
class StageSoFar:
    """A stage before the one being measured, as the run's files say it ended: what a check that
    closes a run (the distribution stage's) reads of the run so far, without importing the
    pipeline that derives it."""

    name: str
    #: Its outcome: a verdict (PASS, FAIL, ...) or what the stage shows without one (NOT
    #: CONFIGURED, NOT APPLICABLE, BLOCKED, ...).
    outcome: str
    reason: str
    #: Its folder in the run; None for a stage the plan does not run.
    folder: Path | None = None
    #: Its checks as the plan has them: (name, kind).
    checks: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PlannedCheck:
    """A check of the run's plan as resolved (its profile applied), with its stage's name: what a
    check reads of a stage that runs after its own (the build stage substitutes from the cache
    that the distribution stage's `binary-cache` check names)."""

    stage: str
    spec: CheckSpec


@dataclass(kw_only=True)
class CheckContext:
    """Handed to `measure`: everything a check needs to run its roles."""

    spec: CheckSpec
    folder: Path
    run_dir: Path
    config: ProjectConfig
    arms: Mapping[str, RoleArm]  # by role
    echo: Callable[[str], None]
    #: Run-wide options from the command line (allow_dirty, override_inputs), as saved.
    options: Mapping[str, Any] = field(default_factory=dict)
    roles_override: tuple[str, ...] | None = None
    #: A transient status line for long steps (a build's newest log line); None clears it.
    progress: Callable[[str | None], None] = lambda _text: None
    #: How far the measurement is (the role at work, counts, time left), for the console.
    advance: Callable[[Progress], None] = lambda _progress: None
    #: What `{role}` says for a role: a run set measuring its members at once names each
    #: member's arm by its label, but its commands see "candidate", as in a run of one.
    role_names: Mapping[str, str] = field(default_factory=dict)
    #: What a build check learned about each role's arm (`record_arm`), by role.
    learned: dict[str, dict[str, str | None]] = field(default_factory=dict)
    #: The stages before this check's, in the default order (with those the plan leaves out or
    #: declares not applicable), read from the run's files when called.
    earlier: Callable[[], tuple[StageSoFar, ...]] = lambda: ()
    #: Every check of the run's plan, in its order (this one's included).
    plan: tuple[PlannedCheck, ...] = ()

    @property
    def roles(self) -> tuple[str, ...]:
        return self.roles_override or self.spec.roles

    def record_arm(self, role: str, *, drv: str | None, out: str | None) -> None:
        """Say what the build learned about a role's arm; the stage runner, which owns
        run.json, records it there for the later stages as soon as the check returns."""
        self.learned[role] = {"drv": drv, "out": out}

    def role_dir(self, role: str) -> Path:
        # Never a link inside the run folder: what the role writes stays in it.
        return ensure_folder(self.folder / role)

    def log(self, role: str, name: str = "run") -> Path:
        return self.folder / "logs" / f"{role}-{name}.log"

    def values(self, role: str, **extra: Value) -> dict[str, Value]:
        """Placeholder values for `role`: built-ins, then variables (arm's over check's over
        project's). A variable's text may use built-ins (`"{project}/models/m.gguf"`)."""
        bound = self.arms[role]
        out_dir = self.role_dir(role)
        builtins: dict[str, Value] = dict(
            out=bound.out,
            bin=f"{bound.out}/bin" if bound.out else None,
            arm=bound.arm.name,
            role=self.role_names.get(role, role),
            dir=str(out_dir),
            out_file=str(out_dir / "output"),
            run_dir=str(self.run_dir),
            port=None,
            installable=bound.arm.installable,
            devshell=bound.arm.devshell,
            project=str(self.config.root),
        )
        builtins.update(extra)
        variables = {**self.config.vars, **self.spec.vars, **bound.arm.vars}
        # A template may put a secret variable anywhere in a command line: its value is redacted
        # from every record and log from now on.
        remember_named(variables)
        values: dict[str, Value] = {
            name: _with_builtins(value, builtins) for name, value in variables.items()
        }
        values.update(builtins)
        return values

    def argv(self, template: str | Sequence[str], role: str, **extra: Value) -> list[str]:
        return expand(template, self.values(role, **extra))

    def env(self, role: str) -> dict[str, str]:
        return child_env(self.arms[role].arm.env, self.spec.env, inherit=self.config.inherit_env)

    def run(
        self,
        role: str,
        argv: Sequence[str],
        *,
        name: str = "run",
        cwd: Path | None = None,
        on_line: Sequence[Callable[[str], None]] = (),
    ) -> process.Completed:
        return process.run(
            argv,
            log=self.log(role, name),
            env=self.env(role),
            cwd=cwd or self.role_dir(role),
            timeout_s=self.spec.timeout_s,
            echo=self.echo,
            on_line=on_line,
        )

    def serve(
        self, role: str, argv: Sequence[str], ready: Callable[[], bool], ready_timeout_s: float
    ) -> AbstractContextManager[process.Server]:
        return process.serve(
            argv,
            log=self.log(role, "server"),
            env=self.env(role),
            ready=ready,
            ready_timeout_s=ready_timeout_s,
            cwd=self.role_dir(role),
            echo=self.echo,
        )

    def save(self, role: str, measurement: dict[str, Any]) -> None:
        """Save a role's raw measurement for `judge` (atomically)."""
        write_json(self.role_dir(role) / "measurement.json", measurement)
