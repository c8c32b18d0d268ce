"""What a `nix-build` check saves besides its source (`qualify.checks.buildfacts`): each role's
build (`BuildMeasurement`, its measurement.json), the dry run of every role before anything was
built (`BuildPlan`, plan.json) and the flake inputs each role's arm uses (`InputsUsed`, its
inputs.json): the types every reader of them goes through."""

from __future__ import annotations

from pydantic import Field

from qualify.checks.evidence import Evidence, Part


class DerivationBuilt(Part):
    """A derivation whose build started, as nix's internal-json log told it."""

    drv: str
    seconds: float | None = Field(description="None: its build never stopped")
    failed: str | None = Field(description="nix's error when its builder failed")
    machine: str = Field(
        default="", description="the remote builder's store URI; empty: this machine (absent in older runs)"
    )


class FailedDerivation(Part):
    drv: str
    tail: list[str] = Field(description="the last lines of its build log")


class BuildMeasurement(Evidence):
    """One role's `nix build` of its arm from the locked flake."""

    role: str
    arm: str
    installable: str = Field(description="the arm's installable as the plan gives it")
    ref: str = Field(description="the installable as built from the locked flake")
    extra_args: list[str] = Field(description="nix's arguments after the installable (secrets redacted)")
    from_project_flake: bool
    ok: bool
    returncode: int
    seconds: float = Field(description="the build's wall time")
    drv: str | None = Field(description="None when the build failed")
    outputs: dict[str, str] = Field(description="output name -> store path")
    out: str | None = Field(description="the `out` output, else the first one")
    gcroot: str = Field(description="the out-link that keeps the build from the garbage collector")
    shared_build_with: str | None = Field(description="the role whose identical build this one is")
    built: list[DerivationBuilt]
    progress: list[int] | None = Field(description="nix's last count: done, expected, running, failed")
    messages: list[str] = Field(description="nix's last messages (20 at most)")
    log: str
    failed: list[FailedDerivation] | None = Field(
        None, description="only when the build failed: the derivations whose outputs are missing"
    )


class RolePlan(Part):
    """One role's dry run: what nix would build and fetch, or why it could not evaluate."""

    drv: str | None = None
    will_build: list[str] = Field(default_factory=list)
    will_fetch: list[str] = Field(default_factory=list)
    fetch_summary: str | None = None
    error: str | None = Field(None, description="why the dry run failed; then it lists nothing")
    hint: str | None = None
    shared: list[str] = Field(description="derivations another role builds too")
    exclusive: list[str] = Field(description="derivations only this role builds")


class BuildPlan(Evidence):
    roles: dict[str, RolePlan]


class InputUsed(Part):
    """A flake input an arm uses, with its locked facts (named as flake.lock names them), or,
    for an input the candidate overrides, its original reference."""

    original: str | None = None
    type: str | None = None
    rev: str | None = None
    narHash: str | None = None
    lastModified: str | None = Field(default=None, description="ISO 8601, UTC")
    revCount: int | None = None
    override: bool = Field(default=False, description="--override-input replaced it for the candidate")


class InputsUsed(Evidence):
    """inputs.json: the flake inputs a role's arm uses, and how they were attributed."""

    method: str = Field(description="declared by the flake, a probe package found, or unknown")
    inputs: dict[str, InputUsed]
    flake_inputs: list[str] = Field(description="every input of the flake")
